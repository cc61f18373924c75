package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/internal/grpcreflect"
	"github.com/tributarydb/tributary/node"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// listServices asks a listener's reflection service for its services.
func listServices(ctx context.Context, cc *grpc.ClientConn) ([]string, error) {
	stream, err := rpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	defer stream.CloseSend()
	// io.EOF from Send means the server ended the stream (a refused
	// token, before the request was read): Recv returns its status.
	if err := stream.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	return names, nil
}

func TestServe_ReflectionOnLoopbackBehindTheTokenHealthWithout(t *testing.T) {
	const token = "fleet-token-0123456789"
	t.Setenv("TRIBUTARY_TOKEN", token)
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for _, tc := range []struct {
		name string
		mode grpcreflect.Mode
		want bool
	}{{"auto on loopback", grpcreflect.Auto, true}, {"turned off", grpcreflect.Off, false}} {
		t.Run(tc.name, func(t *testing.T) {
			sf := serveFlags{grpcListen: "127.0.0.1:0", reflection: tc.mode}
			gh := nodeGRPCHealth(n)
			defer gh.Close()
			fe, err := sf.start(n, gh.Register(testNodeAPI(n, "test").Register), nil, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer fe.stop(time.Second)
			cc, err := grpc.NewClient(fe.addrs[1].(string), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// The health service answers without a token (a kubelet probe has none).
			resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("health without a token: %v %v", resp, err)
			}
			// Reflection needs the token like every other service.
			if _, err := listServices(ctx, cc); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("reflection without a token: %v, want Unauthenticated", err)
			}
			actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
			names, err := listServices(actx, cc)
			if !tc.want {
				if status.Code(err) != codes.Unimplemented {
					t.Fatalf("reflection turned off: %v %v, want Unimplemented", names, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{pb.WriteService_ServiceDesc.ServiceName, pb.QueryService_ServiceDesc.ServiceName,
				healthpb.Health_ServiceDesc.ServiceName, "grpc.reflection.v1.ServerReflection"} {
				if !slices.Contains(names, s) {
					t.Fatalf("reflection lists %v, without %s", names, s)
				}
			}
		})
	}
}

func TestCoordinator_ClusterAndIntakeListenersServeHealthAndReflection(t *testing.T) {
	f := startTestFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, addr := range map[string]string{"cluster": f.c.ClusterAddr(), "intake": f.c.IntakeAddr()} {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("%s listener health: %v %v", name, resp, err)
		}
		names, err := listServices(ctx, cc)
		if err != nil || !slices.Contains(names, healthpb.Health_ServiceDesc.ServiceName) || len(names) < 3 {
			t.Fatalf("%s listener reflection: %v %v", name, names, err)
		}
	}
}
