package replicator_test

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

type queryService struct {
	pb.UnimplementedQueryServiceServer
}

func TestTunnelOptions_Validate(t *testing.T) {
	good := func() replicator.TunnelOptions {
		return replicator.TunnelOptions{NodeID: "pi-7", Targets: []string{"127.0.0.1:7001"}, Insecure: true, Query: queryService{}}
	}
	for _, tc := range []struct {
		name string
		edit func(*replicator.TunnelOptions)
		want string // substring of the error; empty: valid
	}{
		{"defaults", func(*replicator.TunnelOptions) {}, ""},
		{"no node id", func(o *replicator.TunnelOptions) { o.NodeID = "" }, "NodeID is required"},
		{"no targets", func(o *replicator.TunnelOptions) { o.Targets = nil }, "Targets is empty"},
		{"blank target", func(o *replicator.TunnelOptions) { o.Targets = []string{" "} }, "Targets[0] is empty"},
		{"TLS and insecure", func(o *replicator.TunnelOptions) { o.TLS = &tls.Config{} }, "exactly one of TLS and Insecure"},
		{"neither TLS nor insecure", func(o *replicator.TunnelOptions) { o.Insecure = false }, "exactly one of TLS and Insecure"},
		{"no query service", func(o *replicator.TunnelOptions) { o.Query = nil }, "Query is required"},
		{"backoff max below initial", func(o *replicator.TunnelOptions) { o.BackoffInitial, o.BackoffMax = time.Second, time.Millisecond }, "backoff"},
		{"negative keepalive", func(o *replicator.TunnelOptions) { o.KeepaliveTime = -time.Second }, "negative keepalive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good()
			tc.edit(&o)
			_, err := replicator.NewTunnels(o)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestOptions_TunnelOptionsFollowTheShipper(t *testing.T) {
	o := replicator.Options{Targets: []string{"a:1", "b:2"}, Insecure: true, BackoffInitial: time.Second, BackoffMax: time.Hour,
		KeepaliveTime: 7 * time.Second}
	to := o.TunnelOptions("pi-7", queryService{})
	if to.NodeID != "pi-7" || len(to.Targets) != 2 || !to.Insecure || to.BackoffInitial != time.Second ||
		to.BackoffMax != 30*time.Second || to.KeepaliveTime != 7*time.Second {
		t.Fatalf("tunnel options %+v", to)
	}
	if _, err := replicator.NewTunnels(to); err != nil {
		t.Fatal(err)
	}
}
