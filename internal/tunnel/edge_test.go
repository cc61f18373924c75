package tunnel_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/internal/tunnel"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

type queryService struct {
	pb.UnimplementedQueryServiceServer
}

func TestEdgeOptions_Validate(t *testing.T) {
	good := func() tunnel.EdgeOptions {
		return tunnel.EdgeOptions{NodeID: "pi-7", Targets: []string{"127.0.0.1:7001"}, Query: queryService{},
			DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}}
	}
	for _, tc := range []struct {
		name string
		edit func(*tunnel.EdgeOptions)
		want string // substring of the error; empty: valid
	}{
		{"defaults", func(*tunnel.EdgeOptions) {}, ""},
		{"no node id", func(o *tunnel.EdgeOptions) { o.NodeID = "" }, "NodeID is required"},
		{"no targets", func(o *tunnel.EdgeOptions) { o.Targets = nil }, "Targets is empty"},
		{"blank target", func(o *tunnel.EdgeOptions) { o.Targets = []string{" "} }, "Targets[0] is empty"},
		{"no dial options", func(o *tunnel.EdgeOptions) { o.DialOptions = nil }, "transport credentials are required"},
		{"no query service", func(o *tunnel.EdgeOptions) { o.Query = nil }, "Query is required"},
		{"backoff max below initial", func(o *tunnel.EdgeOptions) { o.BackoffInitial, o.BackoffMax = time.Second, time.Millisecond }, "backoff"},
		{"jitter above one", func(o *tunnel.EdgeOptions) { o.BackoffJitter = 1.5 }, "jitter 1.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good()
			tc.edit(&o)
			_, err := tunnel.NewEdge(o)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
