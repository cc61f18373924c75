package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

func runQuery(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:7070", "node gRPC address")
	since := fs.Duration("since", time.Hour, "query the last DURATION (ignored with --start)")
	start := fs.String("start", "", "start time, RFC 3339 or Unix milliseconds")
	end := fs.String("end", "", "end time, RFC 3339 or Unix milliseconds (default now)")
	step := fs.Duration("step", 0, "downsample to buckets of DURATION (0: raw samples)")
	fn := fs.String("fn", "avg", "downsample function: avg, sum, min, max, count, first, last")
	agg := fs.String("agg", "", "aggregate across series with this function")
	by := fs.String("by", "", "comma-separated labels to group by (with --agg)")
	last := fs.Bool("last", false, "only the newest point of each series")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: tributary query [flags] 'metric{label=\"value\",...}'")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("%w: want exactly one selector, got %d arguments", errUsage, fs.NArg())
	}
	ms, err := labels.ParseSelector(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	now := time.Now()
	endMs, err := parseTime(*end, now.UnixMilli())
	if err != nil {
		return fmt.Errorf("%w: --end: %v", errUsage, err)
	}
	startMs, err := parseTime(*start, endMs-since.Milliseconds())
	if err != nil {
		return fmt.Errorf("%w: --start: %v", errUsage, err)
	}
	req := &pb.QueryRequest{StartMs: startMs, EndMs: endMs, Mode: pb.QueryMode_QUERY_MODE_RAW}
	for _, m := range ms {
		req.Matchers = append(req.Matchers, &pb.Matcher{Type: pb.Matcher_Type(m.Type), Name: m.Name, Value: m.Value})
	}
	if *step > 0 {
		f, err := rollup.ParseFunc(*fn)
		if err != nil || f == rollup.FuncNone {
			return fmt.Errorf("%w: --fn %q: want avg, sum, min, max, count, first or last", errUsage, *fn)
		}
		req.Mode, req.StepMs, req.Downsample = pb.QueryMode_QUERY_MODE_DOWNSAMPLE, step.Milliseconds(), pb.Aggregate(f)
	}
	if *last {
		req.Mode = pb.QueryMode_QUERY_MODE_LAST_POINT
	}
	if *agg != "" {
		f, err := rollup.ParseFunc(*agg)
		if err != nil || f == rollup.FuncNone {
			return fmt.Errorf("%w: --agg %q: want avg, sum, min, max, count, first or last", errUsage, *agg)
		}
		req.Aggregate = pb.Aggregate(f)
		if *by != "" {
			req.GroupBy = strings.Split(*by, ",")
		}
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect %s: %w", *addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	stream, err := pb.NewQueryServiceClient(conn).Query(ctx, req)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERIES\tTIME\tVALUE")
	name := ""
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if msg.Series != nil {
			name = seriesString(msg.Series)
		}
		for i, t := range msg.TimestampsMs {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", name, time.UnixMilli(t).UTC().Format(time.RFC3339Nano), fmtValue(msg.Values[i]))
		}
		for _, w := range msg.Warnings {
			fmt.Fprintf(stderr, "warning: %s\n", w)
		}
	}
	return tw.Flush()
}

func seriesString(s *pb.Series) string {
	pairs := make([]labels.Label, len(s.Labels))
	for i, l := range s.Labels {
		pairs[i] = labels.Label{Name: l.Name, Value: l.Value}
	}
	ls, err := labels.New(pairs, labels.Limits{})
	if err != nil { // groups have no metric name
		parts := make([]string, len(pairs))
		for i, p := range pairs {
			parts[i] = fmt.Sprintf("%s=%q", p.Name, p.Value)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	return ls.String()
}

func fmtValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.6g", v)
}

func parseTime(s string, def int64) (int64, error) {
	if s == "" {
		return def, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UnixMilli(), nil
	}
	var ms int64
	if _, err := fmt.Sscan(s, &ms); err == nil {
		return ms, nil
	}
	return 0, fmt.Errorf("%q is neither RFC 3339 nor Unix milliseconds", s)
}
