package influxql

import (
	"context"
	"testing"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/model"
)

// partialBackend answers as its backend does, and says every query's
// answer misses an edge, as a coordinator does when one is unreachable.
type partialBackend struct {
	backend.Backend
}

func (p partialBackend) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	info, err := p.Backend.Query(ctx, q, emit)
	info.Warnings = append(info.Warnings, "edge e7 unreachable: its data after the watermark is missing")
	return info, err
}

// TestSelect_PartialAnswerSaysWhatIsMissing: a backend's warnings (a
// coordinator that could not reach an edge) become the result's warning
// messages, once each, so a partial answer is never silent.
func TestSelect_PartialAnswerSaysWhatIsMissing(t *testing.T) {
	n := newTestEnv(t, Options{}).node
	e := newTestEnvFor(t, n, partialBackend{n}, Options{})
	loadFixtureData(e)
	a := e.query("mydb", "SELECT mean(usage_user), max(usage_system) FROM cpu", "")
	want := `{"results":[{"statement_id":0,"series":[{"name":"cpu","columns":["time","mean","max"],"values":[["1970-01-01T00:00:00Z",30,8]]}],"messages":[{"level":"warning","text":"edge e7 unreachable: its data after the watermark is missing"}]}]}` + "\n"
	if a.raw != want {
		t.Fatalf("got  %s\nwant %s", a.raw, want)
	}
}
