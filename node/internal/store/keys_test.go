package store

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/linxGnu/grocksdb"
)

func TestPartitionStart(t *testing.T) {
	tests := []struct {
		name     string
		t, width int64
		want     int64
	}{
		{"zero", 0, 10, 0},
		{"inside first", 9, 10, 0},
		{"on boundary", 10, 10, 10},
		{"just before zero", -1, 10, -10},
		{"negative boundary", -10, 10, -10},
		{"negative inside", -11, 10, -20},
		{"min supported", MinTimestampMs, dayMs, MinTimestampMs/dayMs*dayMs - dayMs},
		{"max supported", MaxTimestampMs, dayMs, MaxTimestampMs / dayMs * dayMs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := partitionStart(tt.t, tt.width); got != tt.want {
				t.Fatalf("partitionStart(%d, %d) = %d, want %d", tt.t, tt.width, got, tt.want)
			}
		})
	}
}

func TestTimeEncoding_SortsLikeNumbers(t *testing.T) {
	ts := []int64{MinTimestampMs, -1 << 40, -2, -1, 0, 1, 2, 1 << 40, MaxTimestampMs}
	for i := 1; i < len(ts); i++ {
		a, b := appendTime(nil, ts[i-1]), appendTime(nil, ts[i])
		if bytes.Compare(a, b) >= 0 {
			t.Fatalf("enc(%d) >= enc(%d)", ts[i-1], ts[i])
		}
		if decodeTime(b) != ts[i] {
			t.Fatalf("decode(enc(%d)) = %d", ts[i], decodeTime(b))
		}
	}
}

// TestEscaping_PreservesOrderAndRoundTrips checks the property the
// postings skip-scan rests on: esc(s)+term sorts like s, and esc(s)+after
// lies between every key of s and the first key of the next string.
func TestEscaping_PreservesOrderAndRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0x00, 0x01, 0x02, 'a', 'b', 0xFF}
	gen := func() string {
		b := make([]byte, rng.IntN(5))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 20000 {
		a, b := gen(), gen()
		ka := appendTerminated(nil, a)
		kb := appendTerminated(nil, b)
		if got, want := bytes.Compare(ka, kb), strings.Compare(a, b); got != want {
			t.Fatalf("compare(esc(%q), esc(%q)) = %d, want %d", a, b, got, want)
		}
		// A full postings key of a sorts before after(a), and after(a)
		// sorts at or before every key of a larger b.
		full := append(append([]byte{}, ka...), 0xFF, 0xFF)
		after := appendAfter(nil, a)
		if bytes.Compare(full, after) >= 0 {
			t.Fatalf("key of %q not below after(%q)", a, a)
		}
		if a < b && bytes.Compare(after, kb) > 0 {
			t.Fatalf("after(%q) above esc(%q)", a, b)
		}
		got, rest, err := readTerminated(append(ka, 'x'))
		if err != nil || got != a || string(rest) != "x" {
			t.Fatalf("readTerminated(esc(%q)) = %q, %q, %v", a, got, rest, err)
		}
	}
}

func TestReadTerminated_RejectsMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"unterminated": []byte("abc"),
		"lone zero":    {'a', 0x00},
		"bad escape":   {'a', 0x00, 0x07},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := readTerminated(b); err == nil {
				t.Fatalf("readTerminated(%x) succeeded", b)
			}
		})
	}
}

func TestCompressionLinked(t *testing.T) {
	tests := []struct {
		name string
		c    grocksdb.CompressionType
		want bool
	}{
		{"none is always there", grocksdb.NoCompression, true},
		{"xpress is Windows-only", grocksdb.XpressCompression, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := compressionLinked(tt.c); got != tt.want {
				t.Fatalf("compressionLinked(%s) = %v, want %v", compressionName(tt.c), got, tt.want)
			}
		})
	}
	c := chooseCompressions()
	t.Logf("chosen: %s for hot column families, %s for the others", compressionName(c.hot), compressionName(c.cold))
}
