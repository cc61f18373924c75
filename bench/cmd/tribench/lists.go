package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// intList is a flag of comma-separated integers ("10,100,1000"); a value
// given replaces the default.
type intList []int

func (l *intList) String() string { return joinList(*l, strconv.Itoa) }

func (l *intList) Set(v string) error {
	xs, err := splitList(v, strconv.Atoi)
	if err != nil {
		return fmt.Errorf("not a list of integers: %q", v)
	}
	*l = xs
	return nil
}

// durationList is a flag of comma-separated durations ("1s,30s"); a value
// given replaces the default.
type durationList []time.Duration

func (l *durationList) String() string { return joinList(*l, time.Duration.String) }

func (l *durationList) Set(v string) error {
	ds, err := splitList(v, time.ParseDuration)
	if err != nil {
		return fmt.Errorf("not a list of durations: %q", v)
	}
	*l = ds
	return nil
}

func joinList[T any](xs []T, format func(T) string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = format(x)
	}
	return strings.Join(s, ",")
}

// splitList parses each comma-separated field of v, spaces around it
// trimmed.
func splitList[T any](v string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(v, ",") {
		x, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}
