package restart

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// walSize is what a node's WAL directory holds.
type walSize struct {
	Bytes    int64
	Segments int
}

// measureWAL sums the sizes of the segment files (*.seg) directly in walDir.
// The state file and anything in quarantine/ are not the log the node
// replays, so they do not count. A segment removed while the directory is
// read (the node deletes flushed segments) is skipped.
func measureWAL(walDir string) (walSize, error) {
	entries, err := os.ReadDir(walDir)
	if err != nil {
		return walSize{}, fmt.Errorf("measure wal: %w", err)
	}
	var ws walSize
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".seg") {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return walSize{}, fmt.Errorf("measure wal: %w", err)
		}
		ws.Bytes += info.Size()
		ws.Segments++
	}
	return ws, nil
}

// walDir is where a node keeps its WAL inside its data directory.
func walDir(dataDir string) string { return filepath.Join(dataDir, "wal") }

// nodeOpened is what a node's "node opened" log line says about its start.
type nodeOpened struct {
	// ReplayedPoints is the number of WAL points the node replayed.
	ReplayedPoints int64
	// Took is the node's own measure of opening its store and replaying
	// its WAL, process start-up and listener excluded.
	Took time.Duration
}

var (
	openedLine     = regexp.MustCompile(`msg="?node opened"?`)
	replayedPoints = regexp.MustCompile(`\breplayed_points=(\d+)`)
	tookField      = regexp.MustCompile(`\btook=(\S+)`)
)

// parseNodeOpened finds the last "node opened" line in a node's log. The
// figures are informative only: ok is false when the line or a field is
// missing, as with another log format.
func parseNodeOpened(log []byte) (_ nodeOpened, ok bool) {
	lines := strings.Split(string(log), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		if !openedLine.MatchString(line) {
			continue
		}
		p := replayedPoints.FindStringSubmatch(line)
		t := tookField.FindStringSubmatch(line)
		if p == nil || t == nil {
			return nodeOpened{}, false
		}
		points, err1 := strconv.ParseInt(p[1], 10, 64)
		took, err2 := time.ParseDuration(strings.Trim(t[1], `"`))
		if err1 != nil || err2 != nil {
			return nodeOpened{}, false
		}
		return nodeOpened{ReplayedPoints: points, Took: took}, true
	}
	return nodeOpened{}, false
}
