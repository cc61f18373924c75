package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tributarydb/tributary/internal/ackwatch"
)

// ackedThroughGauge is the edge's gauge of the newest segment the cloud
// acknowledged contiguously.
const ackedThroughGauge = "tributary_replication_acked_through_seq"

// AckWatch scrapes every running edge's acknowledged-through gauge at a
// fixed period and records when it moved (see ackwatch.Watch). It is safe
// for concurrent use.
type AckWatch struct{ *ackwatch.Watch }

// AckPause is the longest time an edge went without an acknowledgement.
type AckPause = ackwatch.Pause

// WatchAcks starts scraping edges every period.
func WatchAcks(edges []*Edge, every time.Duration) *AckWatch {
	sources := make([]ackwatch.Source, len(edges))
	for i, e := range edges {
		sources[i] = ackwatch.Source{ID: e.ID, Read: func(ctx context.Context) (float64, bool, error) {
			if !e.Running() {
				return 0, false, nil
			}
			m, err := Metrics(ctx, e.HTTP, ackedThroughGauge)
			v, ok := m[ackedThroughGauge]
			return v, ok, err
		}}
	}
	return &AckWatch{ackwatch.Start(every, sources...)}
}

// Summary is one line: the longest pause of each edge, and scrape errors.
func (w *AckWatch) Summary(from, to time.Time) string {
	ps := w.Pauses(from, to)
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return fmt.Sprintf("longest acknowledgement pauses: %s; %d failed scrapes", strings.Join(parts, ", "), w.Errors())
}
