package restart

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestMeasureWAL_CountsOnlySegmentFiles(t *testing.T) {
	type file struct {
		path string
		size int
	}
	tests := []struct {
		name         string
		files        []file
		wantBytes    int64
		wantSegments int
	}{
		{"empty", nil, 0, 0},
		{"segments", []file{{"00000000000000000001.seg", 4 << 20}, {"00000000000000000002.seg", 1000}}, 4<<20 + 1000, 2},
		{"state file, temporaries and quarantine left out", []file{
			{"00000000000000000007.seg", 500},
			{"wal.state", 64},
			{"wal.state.tmp", 64},
			{"00000000000000000008.seg.tmp", 300},
			{"quarantine/00000000000000000003.seg", 9000},
		}, 500, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				path := filepath.Join(dir, f.path)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, make([]byte, f.size), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := measureWAL(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got.Bytes != tc.wantBytes || got.Segments != tc.wantSegments {
				t.Errorf("got %+v, want %d bytes in %d segments", got, tc.wantBytes, tc.wantSegments)
			}
		})
	}
}

func TestMeasureWAL_MissingDirectoryIsAnError(t *testing.T) {
	if _, err := measureWAL(filepath.Join(t.TempDir(), "wal")); err == nil {
		t.Error("no error for a missing WAL directory")
	}
}

func TestParseNodeOpened(t *testing.T) {
	tests := []struct {
		name   string
		log    string
		want   nodeOpened
		wantOK bool
	}{
		{"text handler line",
			`time=2026-11-22T03:16:00.494Z level=INFO msg="node opened" data_dir=/d series=10000 replayed_points=2130000 head_samples=2130000 took=243ms` + "\n" +
				`time=2026-11-22T03:16:00.495Z level=INFO msg="node ready" grpc=127.0.0.1:1` + "\n",
			nodeOpened{ReplayedPoints: 2_130_000, Took: 243 * time.Millisecond}, true},
		{"the last start wins",
			"level=INFO msg=\"node opened\" replayed_points=1 took=1s\nlevel=INFO msg=\"node opened\" replayed_points=2 took=1.5s\n",
			nodeOpened{ReplayedPoints: 2, Took: 1500 * time.Millisecond}, true},
		{"no such line", `level=INFO msg="node ready"`, nodeOpened{}, false},
		{"json log format", `{"level":"INFO","msg":"node opened","replayed_points":5,"took":1000000}`, nodeOpened{}, false},
		{"field missing", `level=INFO msg="node opened" took=3ms`, nodeOpened{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseNodeOpened([]byte(tc.log))
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("got %+v, %v; want %+v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
