package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/tributarydb/tributary/sdk/go/tributary"
)

// runSeries lists the series matching a selector.
func runSeries(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("series", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs, "give up after this long")
	limit := fs.Int("limit", 0, "list at most this many series (0: the server's limit)")
	format := fs.String("format", "text", "output: text (one series a line) or json (an array of label objects)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: tributary series [flags] ['metric{label=\"value\",...}']")
		fmt.Fprintln(stderr, "\nLists the series matching the selector (every series without one).")
		fs.PrintDefaults()
	}
	args, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 1 {
		fs.Usage()
		return fmt.Errorf("%w: want at most one selector, got %d arguments", errUsage, len(args))
	}
	if *limit < 0 {
		return fmt.Errorf("%w: --limit %d is negative", errUsage, *limit)
	}
	if err := checkTextOrJSON(*format); err != nil {
		return err
	}
	sel, err := optionalSelector(arg(args, 0))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	c, err := cf.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	list, err := c.Series(ctx, sel, *limit)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(stdout)
	if *format == "json" {
		maps := make([]map[string]string, len(list))
		for i, ls := range list {
			maps[i] = ls.Map()
		}
		if err := writeJSON(bw, maps); err != nil {
			return err
		}
	} else {
		for _, ls := range list {
			fmt.Fprintln(bw, ls)
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if *limit > 0 && len(list) == *limit {
		fmt.Fprintf(stderr, "listed the first %d series (--limit)\n", *limit)
	}
	return nil
}

// runLabels lists label names, or the values of one label.
func runLabels(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("labels", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs, "give up after this long")
	match := fs.String("match", "", "only series matching this selector, e.g. 'cpu{region=\"eu\"}'")
	format := fs.String("format", "text", "output: text (one a line) or json (an array)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: tributary labels [flags] [NAME]")
		fmt.Fprintln(stderr, "\nLists label names, or with NAME the values of that label (__name__: the metric names).")
		fs.PrintDefaults()
	}
	args, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 1 {
		fs.Usage()
		return fmt.Errorf("%w: want at most one label name, got %d arguments", errUsage, len(args))
	}
	if err := checkTextOrJSON(*format); err != nil {
		return err
	}
	sel, err := optionalSelector(*match)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	c, err := cf.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var list []string
	if name := arg(args, 0); name != "" {
		list, err = c.LabelValues(ctx, name, sel)
	} else {
		list, err = c.LabelNames(ctx, sel)
	}
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(stdout)
	if *format == "json" {
		if list == nil {
			list = []string{}
		}
		if err := writeJSON(bw, list); err != nil {
			return err
		}
	} else {
		for _, s := range list {
			fmt.Fprintln(bw, s)
		}
	}
	return bw.Flush()
}

func checkTextOrJSON(format string) error {
	if format != "text" && format != "json" {
		return fmt.Errorf("%w: --format %q: want text or json", errUsage, format)
	}
	return nil
}

// optionalSelector checks a selector that may be empty.
func optionalSelector(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if _, err := tributary.ParseSelector(s); err != nil {
		return "", fmt.Errorf("%w: %v", errUsage, err)
	}
	return s, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
