package tributary_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/sdk/go/tributary"
)

// exampleNode serves a storage node on a loopback port for the examples.
func exampleNode() (addr string, stop func()) {
	dir, err := os.MkdirTemp("", "tributary-example-")
	if err != nil {
		log.Fatal(err)
	}
	n, err := node.Open(node.Options{DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	g := grpc.NewServer()
	grpcapi.New(n, grpcapi.Options{}).Register(g)
	go g.Serve(lis)
	return lis.Addr().String(), func() {
		g.Stop()
		n.Close()
		os.RemoveAll(dir)
	}
}

// Write with a Writer, then read per-minute maxima back.
func Example() {
	addr, stop := exampleNode()
	defer stop()
	ctx := context.Background()

	c, err := tributary.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	w, err := c.NewWriter(tributary.WriterOptions{})
	if err != nil {
		log.Fatal(err)
	}
	minute := time.Now().Truncate(time.Minute).Add(-time.Minute)
	for i := range 6 {
		t := minute.Add(time.Duration(i) * 10 * time.Second)
		if err := w.Add(ctx, tributary.Metric("temp", "room", "kitchen"), t.UnixMilli(), 20+float64(i)/2); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		log.Fatal(err)
	}

	q := tributary.Downsample(`temp{room="kitchen"}`, minute, minute.Add(time.Minute-time.Millisecond), time.Minute, tributary.FuncMax)
	for s, err := range c.Query(ctx, q).All() {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(s.Labels, len(s.Points), s.Points[0].Value)
	}
	// Output: temp{room="kitchen"} 1 22.5
}

// A Writer reports points the server refuses, with their series and reason.
func ExampleClient_NewWriter() {
	addr, stop := exampleNode()
	defer stop()
	ctx := context.Background()
	c, err := tributary.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	w, err := c.NewWriter(tributary.WriterOptions{
		MaxBatchPoints: 5000,
		FlushInterval:  500 * time.Millisecond,
		OnRejected: func(r tributary.Rejection) {
			fmt.Println("rejected:", r.Reason, r.Labels)
		},
		OnError: func(err error) { log.Println("lost:", err) },
	})
	if err != nil {
		log.Fatal(err)
	}
	now := time.Now()
	w.Add(ctx, tributary.Metric("rpm", "vehicle", "car-01"), now.UnixMilli(), 2100)
	w.Add(ctx, tributary.Metric("rpm", "vehicle", "car-01"), now.Add(-60*24*time.Hour).UnixMilli(), 900)
	if err := w.Close(ctx); err != nil {
		log.Fatal(err)
	}
	st := w.Stats()
	fmt.Println("accepted:", st.Accepted, "rejected:", st.Rejected)
	// Output:
	// rejected: TOO_OLD rpm{vehicle="car-01"}
	// accepted: 1 rejected: 1
}

// The newest point of every series of a metric, grouped by a label.
func ExampleQuery_Grouped() {
	addr, stop := exampleNode()
	defer stop()
	ctx := context.Background()
	c, err := tributary.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	now := time.Now().UnixMilli()
	_, err = c.Write(ctx,
		tributary.Batch{Labels: tributary.Metric("speed", "vehicle", "car-01", "fleet", "north"), TimestampsMs: []int64{now}, Values: []float64{50}},
		tributary.Batch{Labels: tributary.Metric("speed", "vehicle", "car-02", "fleet", "north"), TimestampsMs: []int64{now}, Values: []float64{70}},
		tributary.Batch{Labels: tributary.Metric("speed", "vehicle", "car-03", "fleet", "south"), TimestampsMs: []int64{now}, Values: []float64{30}},
	)
	if err != nil {
		log.Fatal(err)
	}
	series, err := c.Query(ctx, tributary.Last("speed").Grouped(tributary.FuncAvg, "fleet")).Collect()
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range series {
		fmt.Println(s.Labels, s.Points[0].Value)
	}
	// Output:
	// {fleet="north"} 60
	// {fleet="south"} 30
}

func ExampleParseSelector() {
	ms, err := tributary.ParseSelector(`cpu{host="pi-7",region=~"eu-.*"}`)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range ms {
		fmt.Println(m)
	}
	// Output:
	// __name__="cpu"
	// host="pi-7"
	// region=~"eu-.*"
}

// Connecting to a server that requires TLS and a token. (Not run: it needs
// a server at that address.)
func ExampleDial_tls() {
	ctx := context.Background()
	c, err := tributary.Dial(ctx, "tributary.example.com:7070",
		tributary.WithCAFile("/etc/tributary/ca.pem"),
		tributary.WithToken(os.Getenv("TRIBUTARY_TOKEN")),
		tributary.WithKeepalive(30*time.Second, 10*time.Second),
		tributary.WithRetry(tributary.RetryPolicy{MaxAttempts: 8, InitialBackoff: 200 * time.Millisecond, MaxBackoff: 10 * time.Second}),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.NodeID, st.Version)
}
