package csv

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/httpapi/influx"
)

// readAll reads every point of input, and the problems as text.
func readAll(t *testing.T, input string, o Options) (points []string, problems []string, err error) {
	t.Helper()
	r, err := NewReader(strings.NewReader(input), o)
	if err != nil {
		t.Fatal(err)
	}
	for {
		p, err := r.Next()
		var le *LineError
		switch {
		case err == io.EOF:
			return points, problems, nil
		case errors.As(err, &le):
			problems = append(problems, err.Error())
			continue
		case err != nil:
			return points, problems, err
		}
		points = append(points, fmt.Sprintf("%d:%v@%d=%g", p.Line, p.Labels, p.TimestampMs, p.Value))
	}
}

func TestReader_PointsAndTheirLines(t *testing.T) {
	now := time.UnixMilli(1_714_564_800_000)
	in := "# exported\n" +
		"timestamp,metric,value,room,db\n" +
		"\n" +
		"2024-05-01T12:00:00.250Z,temp,20.5,a,\n" +
		" 1714564801 , temp, 21 , \"b, c\",own\r\n" +
		"\"2024-05-01 12:00:02\",hum,NaN,a,\n" +
		",hum,-1.5e1,,\n" +
		"1714564803.5,hum,+Inf,a,\n"
	got, problems, err := readAll(t, in, Options{Precision: influx.Second, DB: "farm", Now: func() time.Time { return now }})
	if err != nil || len(problems) > 0 {
		t.Fatalf("err %v, problems %q", err, problems)
	}
	want := []string{
		`4:[{__name__ temp} {room a} {db farm}]@1714564800250=20.5`,
		`5:[{__name__ temp} {room b, c} {db own}]@1714564801000=21`,
		`6:[{__name__ hum} {room a} {db farm}]@1714564802000=NaN`,
		`7:[{__name__ hum} {db farm}]@1714564800000=-15`,
		`8:[{__name__ hum} {room a} {db farm}]@1714564803500=+Inf`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("points:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestReader_BadLinesAreSkippedAndNamed(t *testing.T) {
	in := "metric,timestamp,value,host\n" +
		"cpu,1,1,a\n" +
		"cpu,1,one,a\n" +
		"cpu,yesterday,1,a\n" +
		"cpu,1,1\n" +
		"cpu,1,1,\"unterminated\n" +
		",1,1,a\n" +
		"cpu,99999999999999999999,1,a\n" +
		"cpu," + strings.Repeat("9", 100) + ",1,a\n" +
		"cpu,2,2,b\n"
	got, problems, err := readAll(t, in, Options{Precision: influx.Millisecond, MaxLineBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], "2:") || !strings.HasPrefix(got[1], "10:") {
		t.Fatalf("points %q: want lines 2 and 10", got)
	}
	want := []string{
		`line 3: value "one" is not a number`,
		`line 4: timestamp "yesterday": want RFC 3339, YYYY-MM-DD HH:MM:SS or an epoch number in ms`,
		`line 5: 3 fields, the header has 4`,
		`line 6: field 4: unterminated quoted field`,
		`line 7: empty metric`,
		`line 8: timestamp "99999999999999999999" is out of range`,
		`line 9: longer than 64 bytes; skipped`,
	}
	if strings.Join(problems, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
}

func TestReader_UnusableHeaderStopsTheInput(t *testing.T) {
	for name, c := range map[string]struct{ in, want string }{
		"no value column":   {"metric,timestamp,host\ncpu,1,a\n", "line 1: header: want columns metric and value"},
		"bad label name":    {"# c\nmetric,value,1host\n", `line 2: header: column 3: "1host" is not a valid label name`},
		"duplicate column":  {"metric,value,__name__\n", `line 1: header: columns 1 and 3 are both "metric"`},
		"empty input":       {"# nothing\n\n", "the input has no CSV header line"},
		"unterminated head": {"metric,\"value\n", "line 1: header: field 2: unterminated quoted field"},
		"header too long":   {"metric,value," + strings.Repeat("x", 100) + "\n", "line 1: the header is longer than 64 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := readAll(t, c.in, Options{MaxLineBytes: 64})
			var he *HeaderError
			if !errors.As(err, &he) || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("err = %v, want a header error starting %q", err, c.want)
			}
		})
	}
}

func TestReader_NoTimestampIsTheTimeOfReading(t *testing.T) {
	now := time.UnixMilli(42_000)
	got, _, err := readAll(t, "metric,value\nm,1\n", Options{Now: func() time.Time { return now }})
	if err != nil || len(got) != 1 || got[0] != "2:[{__name__ m}]@42000=1" {
		t.Fatalf("points %q, %v", got, err)
	}
}

func TestOptions_Validate(t *testing.T) {
	o := Options{}
	if err := o.Validate(); err != nil || o.MaxLineBytes != 1<<20 || o.Now == nil {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	for _, bad := range []Options{{MaxLineBytes: 8}, {Precision: influx.Precision(99)}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
