package node_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
)

// TestWrite_DeadlineWhileTheWriteLockIsHeldStoresNothing: a write whose
// context ends while another holds the write lock returns the context's
// error at once and stores nothing; the node takes writes again after.
func TestWrite_DeadlineWhileTheWriteLockIsHeldStoresNothing(t *testing.T) {
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	now := time.Now().UnixMilli()
	batch := []model.Batch{{Labels: []labels.Label{{Name: "__name__", Value: "m"}}, Ts: []int64{now}, Vs: []float64{1}}}
	release := n.HoldWriteLockForTest()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := n.Write(ctx, batch)
	release()
	if !errors.Is(err, context.DeadlineExceeded) || res.Accepted != 0 {
		t.Fatalf("write under a held lock: %+v, %v; want DeadlineExceeded", res, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("returned after %s", d)
	}
	got := 0
	if _, err := n.Query(context.Background(), model.Query{Matchers: mustMatch(t, "__name__", "m"), Start: 0, End: now + 1, Mode: model.ModeRaw},
		func(s model.Series) error { got += len(s.Ts); return nil }); err != nil {
		t.Fatal(err)
	}
	if got != 0 {
		t.Fatalf("%d points stored by a write that gave up", got)
	}
	if res, err := n.Write(context.Background(), batch); err != nil || res.Accepted != 1 {
		t.Fatalf("write after: %+v, %v", res, err)
	}
}

func mustMatch(t *testing.T, name, value string) []*labels.Matcher {
	t.Helper()
	m, err := labels.NewMatcher(labels.MatchEqual, name, value)
	if err != nil {
		t.Fatal(err)
	}
	return []*labels.Matcher{m}
}
