package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

// queryTunnels runs replicator.Tunnels beside the Shipper: the node opens
// a query tunnel to every coordinator of --replicate-to and serves its
// QueryService on it, so that coordinators reach it behind NAT.
type queryTunnels struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startQueryTunnels starts the tunnels with the Shipper's coordinators,
// security, keepalives and backoff, serving q (the node's QueryService:
// api.Server's, a QueryServer over backend.ForNode) as node nodeID.
func startQueryTunnels(ro *replicator.Options, nodeID string, q pb.QueryServiceServer, log *slog.Logger) (*queryTunnels, error) {
	t, err := replicator.NewTunnels(ro.TunnelOptions(nodeID, q))
	if err != nil {
		return nil, fmt.Errorf("query tunnels: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	qt := &queryTunnels{cancel: cancel}
	qt.wg.Go(func() {
		if err := t.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("query tunnels stopped", "err", err)
		}
	})
	return qt, nil
}

// stop closes the tunnels; call it before closing the node. A nil
// receiver does nothing.
func (qt *queryTunnels) stop() {
	if qt == nil {
		return
	}
	qt.cancel()
	qt.wg.Wait()
}
