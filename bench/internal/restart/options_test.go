package restart

import (
	"strings"
	"testing"
	"time"
)

func TestOptions_NodeFlagsPerPhase(t *testing.T) {
	o := DefaultOptions()
	o.NodeArgs = []string{"--max-series", "200000"}
	const common = "node --data-dir /d --listen 127.0.0.1:7070 --wal-sync always --log-level info"
	tests := []struct {
		name  string
		phase phase
		want  string
	}{
		{"load keeps everything in the head and the WAL", phaseLoad,
			common + " --head-max-bytes 8589934592 --head-chunk-samples 65536 --max-series 200000"},
		{"restart a has the same head flags", phaseBigHead,
			common + " --head-max-bytes 8589934592 --head-chunk-samples 65536 --max-series 200000"},
		{"restart b has the default head", phaseDefault,
			common + " --max-series 200000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			no := o.nodeOptions(tc.phase, "bin/tributary", "/d", "127.0.0.1:7070", "/w/"+tc.phase.logName(), nil)
			if got := strings.Join(no.Args(), " "); got != tc.want {
				t.Errorf("args\n  %s\nwant\n  %s", got, tc.want)
			}
			if err := no.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
	// The phases must not share the flag slice: appending NodeArgs to one
	// must not show up in another.
	a := o.nodeOptions(phaseLoad, "b", "/d", "127.0.0.1:1", "/l", nil)
	a.ExtraArgs[0] = "changed"
	if BigHeadArgs[0] != "--head-max-bytes" {
		t.Errorf("BigHeadArgs changed through a phase's flags: %v", BigHeadArgs)
	}
}

func TestOptions_Validate(t *testing.T) {
	valid := DefaultOptions()
	valid.Binary = "bin/tributary"
	tests := []struct {
		name    string
		edit    func(*Options)
		wantErr string
	}{
		{"defaults", func(*Options) {}, ""},
		{"no binary", func(o *Options) { o.Binary = "" }, "--binary is required"},
		{"no wal size", func(o *Options) { o.WALBytes = 0 }, "wal size must be positive"},
		{"interval too short for one chunk an hour", func(o *Options) { o.Interval = 50 * time.Millisecond }, "more than a head chunk holds"},
		{"100ms still fits", func(o *Options) { o.Interval = 100 * time.Millisecond }, ""},
		{"sub-millisecond interval", func(o *Options) { o.Interval = 1500 * time.Microsecond }, "whole number of milliseconds"},
		{"batch longer than the hour", func(o *Options) { o.Interval = time.Minute }, "span more than the hour"},
		{"load longer than the chunk age", func(o *Options) { o.MaxLoad = 10 * time.Minute }, "max load must be positive and at most 9m"},
		{"batch smaller than a series' points", func(o *Options) { o.BatchPoints = 10 }, "batch points (10)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := valid
			tc.edit(&o)
			err := o.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
