package replicator_test

import (
	"strings"
	"testing"
	"time"
)

// A peer that reads everything and answers nothing (a half-open link
// behind a proxy, or a socket that keeps absorbing writes) must be caught
// by the ack timeout even while new segments keep being written to it more
// often than the timeout: writes into such a socket are no sign of life.
func TestShipper_SilentPeerIsDetectedWhileNewSegmentsKeepFlowing(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	in.dropAcks.Store(1 << 30)
	w := openWAL(t, "pi-7")
	o := options(t, cursorPath(t), in.addr)
	o.AckTimeout = 500 * time.Millisecond
	o.WindowSegments, o.WindowBytes = 1000, 1<<30 // the window never stops the sender
	s := newShipper(t, o)
	start(t, s, w)
	// One segment every 100 ms for 3 s: each is written in full long
	// before the 500 ms timeout, so only the unanswered writes can tell.
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		w.sealSegment(t, 4, t0+int64(i)*1_000_000)
		if st := s.Stats(); st.SessionFailures > 0 && strings.Contains(st.LastError, "ack timeout") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no ack timeout in 3 s of segments written to a peer that never answers; stats %+v", s.Stats())
}
