package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/sdk/go/tributary"
)

// clientFlags are the connection flags shared by the client commands
// (write, query, series, labels, status).
type clientFlags struct {
	addr            string
	token           string
	tlsCA           string
	tlsCert, tlsKey string
	tlsSkipVerify   bool
	tokenOverPlain  bool
	timeout         time.Duration
	maxAttempts     int
	getenv          func(string) string // os.Getenv; tests replace it
}

// tokenEnv names the environment variable the token is read from when
// --token is not given (the same variable `tributary node` reads).
const tokenEnv = "TRIBUTARY_TOKEN"

func (f *clientFlags) register(fs *flag.FlagSet, timeoutHelp string) {
	fs.StringVar(&f.addr, "addr", "127.0.0.1:7070", "server gRPC address")
	fs.StringVar(&f.token, "token", "", "bearer token (default: $"+tokenEnv+"; prefer the variable, a flag shows in the process list)")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "PEM CA bundle to verify the server with (enables TLS)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM client certificate for servers that demand one (mTLS; enables TLS)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM private key for --tls-cert")
	fs.BoolVar(&f.tlsSkipVerify, "tls-insecure-skip-verify", false, "use TLS without verifying the server certificate (tests only: anyone on the path can impersonate the server)")
	fs.BoolVar(&f.tokenOverPlain, "allow-plaintext-token", false, "send the token without TLS to a non-loopback address (anyone on the path can read it)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, timeoutHelp)
	fs.IntVar(&f.maxAttempts, "max-attempts", tributary.DefaultRetryPolicy.MaxAttempts, "attempts per request when the server is unavailable or overloaded (1: no retry)")
	if f.getenv == nil {
		f.getenv = os.Getenv
	}
}

// newFlagSet makes the flag set of a subcommand: parse errors go to
// stderr, and -h prints usage (unless it is empty) followed by the flags.
func newFlagSet(name string, stderr io.Writer, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if usage != "" {
		fs.Usage = func() {
			fmt.Fprintln(stderr, usage)
			fs.PrintDefaults()
		}
	}
	return fs
}

// newClientFlagSet is newFlagSet for a client command, with the
// connection flags registered (timeoutHelp describes --timeout).
func newClientFlagSet(name string, stderr io.Writer, timeoutHelp, usage string) (*flag.FlagSet, *clientFlags) {
	fs := newFlagSet(name, stderr, usage)
	cf := &clientFlags{}
	cf.register(fs, timeoutHelp)
	return fs, cf
}

// call connects with the flags and runs fn with the client, all within
// --timeout.
func (f *clientFlags) call(fn func(context.Context, *tributary.Client) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	c, err := f.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(ctx, c)
}

// dial connects with the flags. The connection is made by the first call.
func (f *clientFlags) dial(ctx context.Context) (*tributary.Client, error) {
	if f.timeout < 0 {
		return nil, fmt.Errorf("%w: --timeout %s is negative", errUsage, f.timeout)
	}
	if f.maxAttempts < 1 {
		return nil, fmt.Errorf("%w: --max-attempts %d: want 1 or more", errUsage, f.maxAttempts)
	}
	opts := []tributary.Option{
		tributary.WithTimeout(f.timeout),
		tributary.WithRetry(tributary.RetryPolicy{MaxAttempts: f.maxAttempts}),
		tributary.WithUserAgent("tributary-cli/" + version),
	}
	token := f.token
	if token == "" {
		token = strings.TrimSpace(f.getenv(tokenEnv))
	}
	if token != "" {
		opts = append(opts, tributary.WithToken(token))
	}
	if f.tokenOverPlain {
		opts = append(opts, tributary.WithTokenOverPlaintext())
	}
	if f.tlsCA != "" {
		opts = append(opts, tributary.WithCAFile(f.tlsCA))
	}
	if f.tlsCert != "" || f.tlsKey != "" {
		opts = append(opts, tributary.WithClientCertificate(f.tlsCert, f.tlsKey))
	}
	if f.tlsSkipVerify {
		opts = append(opts, tributary.WithInsecureSkipVerify())
	}
	c, err := tributary.Dial(ctx, f.addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return c, nil
}

// parseDuration is time.ParseDuration plus the units d (24h) and w (7d),
// as in "7d" or "1w2d".
func parseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	neg := strings.HasPrefix(s, "-")
	rest := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if rest == "" {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	var total time.Duration
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9') {
			i++
		}
		if i == 0 {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		rest = rest[i:]
		j := 0
		for j < len(rest) && (rest[j] < '0' || rest[j] > '9') {
			j++
		}
		unit := rest[:j]
		rest = rest[j:]
		var u time.Duration
		switch unit {
		case "w":
			u = 7 * 24 * time.Hour
		case "d":
			u = 24 * time.Hour
		default:
			d, err := time.ParseDuration(strconv.FormatInt(n, 10) + unit)
			if err != nil {
				return 0, fmt.Errorf("invalid duration %q", s)
			}
			total += d
			continue
		}
		if n > int64(1<<62)/int64(u) {
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		total += time.Duration(n) * u
	}
	if neg {
		total = -total
	}
	return total, nil
}

// durationFlag is a flag.Value for parseDuration.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

// parseTime reads a point in time: "now"; a relative time such as "-1h",
// "now-30m" or "now+5m" (units as parseDuration); RFC 3339
// ("2024-05-01T12:00:00Z"), or a date or date-time without a zone, taken
// as UTC ("2024-05-01", "2024-05-01T12:00:00", "2024-05-01 12:00:00"); or
// a Unix epoch number, read as milliseconds when it is 10^11 or more
// (after 1973-03-03) and as seconds otherwise. def is returned for "".
func parseTime(s string, now time.Time, def int64) (int64, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return def, nil
	case s == "now":
		return now.UnixMilli(), nil
	case strings.HasPrefix(s, "now-"), strings.HasPrefix(s, "now+"), strings.HasPrefix(s, "-") && !httpapi.IsDigits(s[1:]), strings.HasPrefix(s, "+"):
		rel := strings.TrimPrefix(s, "now")
		d, err := parseDuration(rel)
		if err != nil {
			return 0, fmt.Errorf("%q: bad relative time: %v", s, err)
		}
		return now.Add(d).UnixMilli(), nil
	}
	if httpapi.IsDigits(strings.TrimPrefix(s, "-")) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q: epoch number out of range", s)
		}
		if n >= 1e11 || n <= -1e11 {
			return n, nil
		}
		return n * 1000, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, fmt.Errorf("%q is not a time: want now, -1h, now-30m, RFC 3339, YYYY-MM-DD or Unix seconds or milliseconds", s)
}

// parseArgs parses flags given before, between or after the positional
// arguments (`tributary query cpu --since 1h`) and returns the positional
// ones. Everything after "--" is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if i := len(args) - len(rest); i > 0 && args[i-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseOperand parses the flags as parseArgs does and returns the one
// positional argument, what (a selector, an input file) in the usage
// error: "" when there is none and it is optional. More than one, or none
// when it is required, prints the usage and is a usage error.
func parseOperand(fs *flag.FlagSet, args []string, required bool, what string) (string, error) {
	args, err := parseArgs(fs, args)
	if err != nil {
		return "", err
	}
	if len(args) > 1 || (required && len(args) == 0) {
		fs.Usage()
		want := "at most"
		if required {
			want = "exactly"
		}
		return "", fmt.Errorf("%w: want %s one %s, got %d arguments", errUsage, want, what, len(args))
	}
	return arg(args, 0), nil
}

// parseNoArgs parses the flags of a command that takes no positional
// arguments; one is a usage error.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}

// printList prints items to w: with format "json" as an indented JSON
// array of their asJSON values ([] when there are none), otherwise one
// item a line.
func printList[T, J any](w io.Writer, format string, items []T, asJSON func(T) J) error {
	bw := bufio.NewWriter(w)
	if format == "json" {
		out := make([]J, len(items))
		for i, it := range items {
			out[i] = asJSON(it)
		}
		if err := writeJSON(bw, out); err != nil {
			return err
		}
	} else {
		for _, it := range items {
			fmt.Fprintln(bw, it)
		}
	}
	return bw.Flush()
}

// arg returns the i-th positional argument, or "".
func arg(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}
