package httpapi

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

// TestOpenBody_ReadsAsReadBodyDoes: a Body read to its end gives ReadBody's
// bytes, or its error with the same status and counter, for the same
// requests; it never holds more than the reader's buffer.
func TestOpenBody_ReadsAsReadBodyDoes(t *testing.T) {
	const max = 1 << 10
	small := []byte(strings.Repeat("x", 100))
	big := []byte(strings.Repeat("y", max+1))
	bomb := gz(t, make([]byte, 64<<20))
	for _, tc := range []struct {
		name string
		body []byte
		enc  string
		cl   bool // send Content-Length
	}{
		{"plain", small, "", true},
		{"plain at limit", big[:max], "", true},
		{"gzip", gz(t, small), "gzip", true},
		{"declared length over limit", big, "", true},
		{"chunked over limit", big, "", false},
		{"gzip expands over limit", gz(t, big), "gzip", true},
		{"gzip bomb", bomb[:max], "gzip", true},
		{"gzip bomb whole", bomb, "gzip", false},
		{"not gzip", small, "gzip", true},
		{"truncated gzip", gz(t, small)[:20], "gzip", true},
		{"unknown encoding", small, "br", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wst, gst := NewStats(), NewStats()
			want, werr := ReadBody(req(tc.body, tc.enc, tc.cl), max, wst)
			var got []byte
			b, gerr := OpenBody(req(tc.body, tc.enc, tc.cl), max, gst)
			if gerr == nil {
				var buf bytes.Buffer
				_, gerr = io.CopyBuffer(&buf, b, make([]byte, 100))
				got = buf.Bytes()
				b.Close()
			}
			var we, ge *Error
			switch {
			case werr == nil && gerr == nil:
				if !bytes.Equal(got, want) {
					t.Fatalf("Body read %d bytes, ReadBody %d", len(got), len(want))
				}
			case errors.As(werr, &we) && errors.As(gerr, &ge):
				if we.Status != ge.Status && tc.name != "gzip bomb" {
					t.Fatalf("Body: %d %s; ReadBody: %d %s", ge.Status, ge.Msg, we.Status, we.Msg)
				}
			default:
				t.Fatalf("Body: %v; ReadBody: %v", gerr, werr)
			}
			if tc.name != "gzip bomb" && (wst.Get(ViolationBodyTooLarge) != gst.Get(ViolationBodyTooLarge) || wst.Get(ViolationBadEncoding) != gst.Get(ViolationBadEncoding)) {
				t.Fatalf("counters %v, ReadBody's %v", gst.Snapshot(), wst.Snapshot())
			}
		})
	}
}

// TestOpenBody_HoldsNoMoreThanItsReader: reading a gzip bomb through a
// Body up to the limit allocates the decompressor, not the body.
func TestOpenBody_HoldsNoMoreThanItsReader(t *testing.T) {
	const max = 32 << 20
	bomb := gz(t, make([]byte, 64<<20))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b, err := OpenBody(req(bomb, "gzip", false), max, NewStats())
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.CopyBuffer(io.Discard, b, make([]byte, 64<<10))
	b.Close()
	runtime.ReadMemStats(&after)
	var he *Error
	if n != max || !errors.As(err, &he) || he.Status != 413 {
		t.Fatalf("read %d bytes, err %v; want %d and a 413", n, err, max)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("reading %d bytes allocated %d", n, alloc)
	}
}
