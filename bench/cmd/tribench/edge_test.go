package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestRun_EdgeWorkloadFlags(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"iotdb flags", []string{"iotdb", "-h"}, 0, "-out-of-order-ratio"},
		{"iotdb bad clients", []string{"iotdb", "--clients", "1,x"}, 2, "not a list of integers"},
		{"iotdb too many clients", []string{"iotdb", "--clients", "1,10", "--binary", "/bin/sh", "--commit", "test"}, 1, "client count 10"},
		{"tsbs flags", []string{"tsbs-cpu", "-h"}, 0, "-query-clients"},
		{"tsbs short span", []string{"tsbs-cpu", "--span", "1h", "--binary", "/bin/sh", "--commit", "test"}, 1, "span must exceed 12 hours"},
		{"canbus flags", []string{"canbus", "-h"}, 0, "-points-per-request"},
		{"canbus missing binary", []string{"canbus", "--binary", "/nonexistent/tributary", "--commit", "test"}, 1, "find tributary binary"},
		{"bad profile", []string{"canbus", "--profile", "medium", "--binary", "/bin/sh", "--commit", "test"}, 1, "profile must be short or full"},
		{"rollup bad profile", []string{"rollup", "--profile", "medium"}, 2, "--profile must be short or full"},
		{"rollup-cold without a query", []string{"rollup-cold"}, 2, "usage: tribench rollup-cold"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != tc.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.wantStderr, stderr.String())
			}
		})
	}
}

func TestListFlags(t *testing.T) {
	ints := intList{10, 100}
	if got := ints.String(); got != "10,100" {
		t.Errorf("intList.String = %q", got)
	}
	if err := ints.Set(" 3, 30 ,300"); err != nil || ints.String() != "3,30,300" {
		t.Errorf("intList.Set: %v, %v", err, ints)
	}
	if err := ints.Set("3,x"); err == nil || !strings.Contains(err.Error(), "not a list of integers") {
		t.Errorf("intList.Set(3,x): %v", err)
	}
	ds := durationList{time.Second}
	if err := ds.Set("2s, 1m"); err != nil || ds.String() != "2s,1m0s" {
		t.Errorf("durationList.Set: %v, %v", err, ds)
	}
	if err := ds.Set("2s,soon"); err == nil || !strings.Contains(err.Error(), "not a list of durations") {
		t.Errorf("durationList.Set(2s,soon): %v", err)
	}
	for _, args := range [][]string{{"fleet", "--edges", "10,x"}, {"catalog", "--series", "x"}, {"uplink", "--lag-budgets", "1s,x"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "not a list of") {
			t.Errorf("%q: exit code %d, want 2 and the list's error; stderr:\n%s", args, code, stderr.String())
		}
	}
}
