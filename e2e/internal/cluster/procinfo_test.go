package cluster

import (
	"os"
	"runtime"
	"testing"
)

func TestProcInfo(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	rss, err := RSSBytes(os.Getpid())
	if err != nil || rss <= 0 {
		t.Fatalf("RSSBytes(self) = %d, %v", rss, err)
	}
	n, err := OpenFiles(os.Getpid())
	if err != nil || n < 3 {
		t.Fatalf("OpenFiles(self) = %d, %v", n, err)
	}
	if _, err := RSSBytes(-1); err == nil {
		t.Error("RSSBytes(-1): no error")
	}
	if pid := (&Process{}).PID(); pid != 0 {
		t.Errorf("PID of a process never started = %d", pid)
	}
}

func TestDockerFleetNeedsAnImage(t *testing.T) {
	if _, err := StartDockerFleet(t.Context(), DockerOptions{}); err == nil {
		t.Fatal("a fleet without an image started")
	}
}
