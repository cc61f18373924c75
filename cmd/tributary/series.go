package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/tributarydb/tributary/sdk/go/tributary"
)

// runSeries lists the series matching a selector.
func runSeries(args []string, stdout, stderr io.Writer) error {
	fs, cf := newClientFlagSet("series", stderr, "give up after this long",
		"Usage: tributary series [flags] ['metric{label=\"value\",...}']\n\nLists the series matching the selector (every series without one).")
	limit := fs.Int("limit", 0, "list at most this many series (0: the server's limit)")
	format := fs.String("format", "text", "output: text (one series a line) or json (an array of label objects)")
	selector, err := parseOperand(fs, args, false, "selector")
	if err != nil {
		return err
	}
	if *limit < 0 {
		return fmt.Errorf("%w: --limit %d is negative", errUsage, *limit)
	}
	if err := checkTextOrJSON(*format); err != nil {
		return err
	}
	sel, err := optionalSelector(selector)
	if err != nil {
		return err
	}
	var list []tributary.Labels
	if err := cf.call(func(ctx context.Context, c *tributary.Client) (err error) {
		list, err = c.Series(ctx, sel, *limit)
		return err
	}); err != nil {
		return err
	}
	if err := printList(stdout, *format, list, tributary.Labels.Map); err != nil {
		return err
	}
	if *limit > 0 && len(list) == *limit {
		fmt.Fprintf(stderr, "listed the first %d series (--limit)\n", *limit)
	}
	return nil
}

// runLabels lists label names, or the values of one label.
func runLabels(args []string, stdout, stderr io.Writer) error {
	fs, cf := newClientFlagSet("labels", stderr, "give up after this long",
		"Usage: tributary labels [flags] [NAME]\n\nLists label names, or with NAME the values of that label (__name__: the metric names).")
	match := fs.String("match", "", "only series matching this selector, e.g. 'cpu{region=\"eu\"}'")
	format := fs.String("format", "text", "output: text (one a line) or json (an array)")
	name, err := parseOperand(fs, args, false, "label name")
	if err != nil {
		return err
	}
	if err := checkTextOrJSON(*format); err != nil {
		return err
	}
	sel, err := optionalSelector(*match)
	if err != nil {
		return err
	}
	var list []string
	if err := cf.call(func(ctx context.Context, c *tributary.Client) (err error) {
		if name != "" {
			list, err = c.LabelValues(ctx, name, sel)
		} else {
			list, err = c.LabelNames(ctx, sel)
		}
		return err
	}); err != nil {
		return err
	}
	return printList(stdout, *format, list, func(s string) string { return s })
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
