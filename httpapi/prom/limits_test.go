package prom

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	nlabels "github.com/tributarydb/tributary/node/labels"
)

// acceptingBackend accepts every write and notes the metric names it got.
type acceptingBackend struct {
	backend.Backend
	mu    sync.Mutex
	names []string
}

func (a *acceptingBackend) Write(_ context.Context, batches []model.Batch) (model.WriteResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var res model.WriteResult
	for _, b := range batches {
		a.names = append(a.names, nlabels.Labels(b.Labels).Get(nlabels.MetricName))
		res.Accepted += int64(len(b.Ts))
	}
	return res, nil
}

// TestWrite_SeriesBeyondTheLabelLimitsAreRefusedWhileDecoding: a time
// series with more labels than a series may hold, or a label longer than
// allowed, is refused by the decoder (its labels are never built) and
// reported with its index; the series beside it are stored.
func TestWrite_SeriesBeyondTheLabelLimitsAreRefusedWhileDecoding(t *testing.T) {
	ab := &acceptingBackend{}
	e := newTestEnvFor(t, nil, ab, httpapi.Config{}, Options{})
	now := ms(testNow)
	sample := []prompb.Sample{{Timestamp: now - 1000, Value: 1}}
	many := lbls("__name__", "many_labels")
	for i := range 100_000 {
		many = append(many, prompb.Label{Name: fmt.Sprintf("l%06d", i), Value: "v"})
	}
	st, body, _ := e.post(encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: lbls("__name__", "before"), Samples: sample},
		{Labels: many, Samples: sample},
		{Labels: lbls("__name__", "long_name", strings.Repeat("n", 200), "v"), Samples: sample},
		{Labels: lbls("__name__", "long_value", "v", strings.Repeat("x", 2000)), Samples: sample},
		{Labels: lbls("__name__", "after"), Samples: sample},
	}}), nil)
	lim := nlabels.DefaultLimits
	for _, want := range []string{
		"stored 2 of 5 samples", "invalid_series: 3",
		fmt.Sprintf("timeseries 1: invalid series: 100001 labels, limit is %d", lim.MaxLabels),
		fmt.Sprintf("timeseries 2: invalid series: label name %q... is 200 bytes, limit is %d", strings.Repeat("n", 32), lim.MaxNameBytes),
		fmt.Sprintf("timeseries 3: invalid series: label \"v\": value is 2000 bytes, limit is %d", lim.MaxValueBytes),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("answer does not say %q:\n%s", want, body)
		}
	}
	if st != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", st)
	}
	if got := strings.Join(ab.names, ","); got != "before,after" {
		t.Fatalf("backend got %s, want before,after", got)
	}
}

// TestWrite_TooManySeriesInOneRequestIs413: more distinct series than the
// limit refuses the request whole with 413, found before anything is
// allocated for the series.
func TestWrite_TooManySeriesInOneRequestIs413(t *testing.T) {
	ab := &acceptingBackend{}
	e := newTestEnvFor(t, nil, ab, httpapi.Config{}, Options{})
	req := &prompb.WriteRequest{}
	for i := range httpapi.DefaultMaxSeriesPerRequest + 1 {
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
			Labels: lbls("__name__", "many", "i", fmt.Sprint(i)), Samples: []prompb.Sample{{Timestamp: ms(testNow) - 1000, Value: 1}}})
	}
	st, body, _ := e.post(encodeWrite(t, req), nil)
	want := fmt.Sprintf("timeseries %d: the request holds more than %d series", httpapi.DefaultMaxSeriesPerRequest, httpapi.DefaultMaxSeriesPerRequest)
	if st != http.StatusRequestEntityTooLarge || !strings.Contains(body, want) {
		t.Fatalf("status %d %q, want 413 with %q", st, body, want)
	}
	if len(ab.names) != 0 {
		t.Fatalf("%d series of a refused request reached the backend", len(ab.names))
	}
}

// TestDecode_SnappyClaimBeyondTheBodyIsRefusedBeforeAllocating: a body of
// a few bytes that declares a decoded size within the limit, but more
// than its bytes can decode to, is refused without allocating that size.
func TestDecode_SnappyClaimBeyondTheBodyIsRefusedBeforeAllocating(t *testing.T) {
	body := binary.AppendUvarint(nil, 8<<20)
	body = append(body, 0xfe, 0xff, 0xff, 0xff) // copy elements, too few for 8 MiB
	var e *rwError
	alloc := allocated(func() { _, e = decodeSnappy(nil, body, 32<<20) })
	if e == nil || e.status != http.StatusBadRequest || !strings.Contains(e.msg, "cannot decode to the 8388608 bytes it declares") {
		t.Fatalf("error %v, want a 400 for the impossible claim", e)
	}
	if alloc > 4<<10 {
		t.Fatalf("refusing it allocated %d bytes", alloc)
	}
	// The largest expansion snappy can make is still accepted.
	raw := make([]byte, 1<<20)
	ok := snappy.Encode(nil, raw)
	if _, e := decodeSnappy(nil, ok, 32<<20); e != nil {
		t.Fatalf("a valid body of zeros (%d bytes for %d): %v", len(ok), len(raw), e)
	}
}

// TestDecode_MetadataPerRequestIsBounded: metadata entries past the limit
// are counted, not kept.
func TestDecode_MetadataPerRequestIsBounded(t *testing.T) {
	req := &prompb.WriteRequest{}
	for i := range 50 {
		req.Metadata = append(req.Metadata, prompb.MetricMetadata{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: fmt.Sprint("m", i)})
	}
	raw, err := req.Marshal()
	must(t, err)
	got, err := decodeWriteRequest(raw, rwLimits{maxMetadata: 20})
	if err != nil || len(got.Metadata) != 20 || got.MetadataDropped != 30 || got.Metadata[19].Family != "m19" {
		t.Fatalf("%v: %d kept, %d dropped", err, len(got.Metadata), got.MetadataDropped)
	}
}
