package replicator_test

import (
	"testing"
	"time"

	"github.com/tributarydb/tributary/internal/tunnel"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

type queryService struct {
	pb.UnimplementedQueryServiceServer
}

func TestOptions_TunnelOptionsFollowTheShipper(t *testing.T) {
	o := replicator.Options{Targets: []string{"a:1", "b:2"}, Insecure: true, CursorPath: "cursor",
		BackoffInitial: time.Second, BackoffMax: time.Hour, KeepaliveTime: 7 * time.Second}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	to := o.TunnelOptions("pi-7", queryService{})
	if to.NodeID != "pi-7" || len(to.Targets) != 2 || to.BackoffInitial != time.Second || to.BackoffMax != 30*time.Second ||
		to.BackoffJitter != o.BackoffJitter || to.Logger != o.Logger || to.MeterProvider != o.MeterProvider {
		t.Fatalf("tunnel options %+v", to)
	}
	// Credentials, keepalives and instrumentation: the Shipper's.
	if len(to.DialOptions) < 3 {
		t.Fatalf("%d dial options, want the Shipper's credentials, keepalives and instrumentation", len(to.DialOptions))
	}
	if _, err := tunnel.NewEdge(to); err != nil {
		t.Fatal(err)
	}
}
