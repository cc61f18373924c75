package csv

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/node/labels"
)

// FuzzSplitCSV: splitting never panics, and fields written by
// encoding/csv (without line breaks) come back unchanged.
func FuzzSplitCSV(f *testing.F) {
	for _, s := range []string{"a,b,c", `"a,b",c`, `"say ""hi""",x`, ` a , b `, `"unterminated`, `"a"b`, ",,", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\r\n") {
			return
		}
		fields, err := splitCSV([]byte(line), nil)
		if err != nil {
			return
		}
		for i, fld := range fields {
			if strings.TrimLeft(fld, " \t") != fld && !strings.Contains(line, `"`) {
				t.Fatalf("field %d %q of %q keeps leading blanks", i, fld, line)
			}
		}
		var buf bytes.Buffer
		w := csv.NewWriter(&buf)
		if err := w.Write(fields); err != nil {
			return
		}
		w.Flush()
		again, err := splitCSV(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil)
		if err != nil {
			t.Fatalf("%q (from %q): %v", buf.String(), line, err)
		}
		if !slices.Equal(fields, again) {
			t.Fatalf("%q -> %q -> %q -> %q", line, fields, buf.String(), again)
		}
	})
}

// FuzzCSVRecord: a data line never panics, and a parsed record has a
// metric name.
func FuzzCSVRecord(f *testing.F) {
	f.Add("cpu,1714564800000,1.5,a", "metric,timestamp,value,host")
	f.Add("cpu,2024-05-01T12:00:00Z,NaN,", "metric,timestamp,value,host")
	f.Add(`"x",1e3,-0,"q"`, "__name__,time,value,db")
	f.Fuzz(func(t *testing.T, line, header string) {
		if strings.ContainsAny(line+header, "\r\n") {
			return
		}
		fm := &format{prec: influx.Second, db: "fz"}
		if err := fm.header([]byte(header)); err != nil {
			return
		}
		ls, _, _, err := fm.record([]byte(line), time.Now)
		if err == nil && (len(ls) == 0 || ls[0].Name != labels.MetricName || ls[0].Value == "") {
			t.Fatalf("record %q under %q has no metric: %v", line, header, ls)
		}
	})
}
