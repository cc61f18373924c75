package loadgen

import (
	"flag"
	"fmt"
	"strings"
)

// Flags registers the load's command-line flags on fs and returns a function
// that, after fs.Parse, gives the options they describe (without Logger).
func Flags(fs *flag.FlagSet) func() (Options, error) {
	var o Options
	targets := fs.String("targets", "", "comma-separated gRPC `addresses` of the edge nodes to write to (required)")
	names := fs.String("names", "", "comma-separated values of the edge label, one per target (default: each target's host)")
	fs.IntVar(&o.Series, "series", 64, "sensors (series) per target")
	fs.DurationVar(&o.Interval, "interval", 1e9, "sampling interval of every sensor")
	fs.DurationVar(&o.Flush, "flush", 1e9, "how often each target is sent the samples due")
	fs.IntVar(&o.SeriesPerRequest, "series-per-request", 500, "most series in one Write call")
	fs.DurationVar(&o.CallTimeout, "call-timeout", 10e9, "timeout of one Write call")
	fs.DurationVar(&o.Report, "report", 10e9, "how often the acknowledged points are logged (negative: never)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the sample values")
	return func() (Options, error) {
		if fs.NArg() > 0 {
			return Options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		o.Targets, o.Names = splitList(*targets), splitList(*names)
		if len(o.Targets) == 0 {
			return Options{}, fmt.Errorf("--targets is required")
		}
		return o, nil
	}
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
