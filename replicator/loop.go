package replicator

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/internal/pace"
	"github.com/tributarydb/tributary/internal/seqset"
	"github.com/tributarydb/tributary/node/segment"
	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator/internal/cursor"
	"github.com/tributarydb/tributary/replicator/internal/segsum"
	"github.com/tributarydb/tributary/replicator/wire"
)

// saveCoalesce: while events keep arriving, the cursor is saved at most
// this often (each save is two fsyncs); it is always saved when the loop
// goes idle.
const saveCoalesce = 200 * time.Millisecond

// loop is the Shipper's one goroutine that owns all replication state.
type loop struct {
	// backfillShortfall counts points gaps declared that their backfills
	// did not ship (dropped by retention before the backfill).
	backfillShortfall uint64

	s        *Shipper
	src      Source
	o        *Options
	log      *slog.Logger
	nodeID   string
	ctx      context.Context
	dialOpts []grpc.DialOption
	enc      *wire.Encoder
	events   chan event

	// cur is the cursor: as saved, plus changes not saved yet (dirty).
	cur         cursor.State
	dirty       bool
	lastSave    time.Time
	saveRetryAt time.Time
	// cov holds the sequence numbers above cur.Released that are covered:
	// by segments the cloud acknowledged, by runs the welcome said it
	// holds, and by gaps. Released advances through it.
	cov seqset.Set

	// From the last refresh: sealed segments above Released (ascending),
	// every listed segment above Released (sealed or not, for the chain
	// check), the open segment, and the highest sequence listed.
	segs    []wal.SegmentInfo
	chain   []wal.SegmentInfo
	openSeq uint64
	openB   int64
	newest  uint64 // newest sealed
	maxSeq  uint64
	// gapsChanged: cur.Gaps changed since the stats last copied them.
	gapsChanged bool

	// What the node's store holds of lost segments (missing.go):
	// replayFrom is the node's WALReplayFrom; listed holds the numbers
	// covered by sealed segments the node listed since Run began (their
	// samples are in its store), up to listedMax; sums are the summaries
	// of sealed segments above Released (nil if the file cannot be
	// used), pruned through sumsPruned; judged says the cursor's missing
	// gaps were judged against this process's store.
	replayFrom uint64
	listed     seqset.Set
	listedMax  uint64
	sums       *segsum.File
	sumsPruned uint64
	judged     bool

	// configVersion is the version of the last fleet configuration
	// handed to Options.OnConfig (0: none).
	configVersion uint64
	// ruleGroupsVersion is the version of the last set of rule groups
	// handed to Options.OnRuleGroups (0: none).
	ruleGroupsVersion uint64

	sess      *session
	sessID    uint64
	target    int
	nextDial  time.Time
	dialTimer *time.Timer
	backoff   pace.Backoff
	rateAll   pace.Bucket
	rateBack  pace.Bucket
	rateTimer *time.Timer
	annTimer  *time.Timer // the next announcement is due
	// announced counts series announced (sent); registeredMs is the
	// registration watermark the catalog last answered.
	announced    int64
	registeredMs int64
	// retry holds segments refused or unreadable: not before when, and how
	// often so far. gapRetry, gaps refused.
	retry    map[uint64]retryState
	gapRetry map[uint64]time.Time
	// backfill is the backfill in progress (backfill.go), nil when none.
	backfill *backfillPlan
	// reships are the runs the cloud asked to ship again (reship.go),
	// in the order asked; reshipNotes the unavailable answers not sent
	// yet.
	reships     []*reshipJob
	reshipNotes []*pb.ShipReshipUnavailable

	shippedSegs, shippedBytes, shippedPoints int64
	sends, refusals, sessions, failures      int64
	lastErr                                  string
	fatal                                    error

	// Reship counters (Stats): requests, those ignored, runs or parts
	// answered unavailable, files acknowledged from the WAL and rebuilt,
	// and their bytes.
	reshipRequests, reshipIgnored, reshipUnavail int64
	reshipWAL, reshipRebuilt, reshipBytes        int64
}

type retryState struct {
	notBefore time.Time
	attempts  int
	// refused: the cloud refused the segment as retryable (it could not
	// make it durable, e.g. a replica was down); the next acknowledgement
	// shows it can again, and releases the wait.
	refused bool
	// asWritten: the cloud refused the compacted form as a conflict;
	// ship the segment as written (compact).
	asWritten bool
}

func newLoop(s *Shipper, src Source) (*loop, error) {
	o := &s.opts
	enc, err := wire.NewEncoder(o.Compression)
	if err != nil {
		return nil, err
	}
	seed := uint64(time.Now().UnixNano())
	l := &loop{
		s: s, src: src, o: o, log: o.Logger.With("component", "replicator", "node", src.NodeID()),
		nodeID:   src.NodeID(),
		dialOpts: o.dialOptions(),
		enc:      enc,
		events:   make(chan event, 64),
		cur:      s.initial,
		backoff:  pace.Backoff{Initial: o.BackoffInitial, Max: o.BackoffMax, Jitter: o.BackoffJitter, Rand: rand.New(rand.NewPCG(seed, 0x7e1e))},
		rateAll:  pace.Bucket{Rate: o.MaxBytesPerSec},
		rateBack: pace.Bucket{Rate: o.BacklogBytesPerSec},
		retry:    map[uint64]retryState{},
		gapRetry: map[uint64]time.Time{},
	}
	if l.cur.NodeID == "" {
		l.cur.NodeID = l.nodeID
		l.dirty = true
	}
	l.dialTimer = time.NewTimer(time.Hour)
	l.dialTimer.Stop()
	l.rateTimer = time.NewTimer(time.Hour)
	l.rateTimer.Stop()
	l.annTimer = time.NewTimer(time.Hour)
	l.annTimer.Stop()
	l.replayFrom = src.WALReplayFrom()
	l.openSummaries()
	return l, nil
}

func (l *loop) run(ctx context.Context) error {
	l.ctx = ctx
	defer l.enc.Close()
	defer l.dialTimer.Stop()
	defer l.rateTimer.Stop()
	defer l.annTimer.Stop()
	defer l.closeSummaries()
	poll := time.NewTicker(l.o.PollInterval)
	defer poll.Stop()
	l.refresh()
	for {
		l.step()
		if l.fatal != nil {
			l.shutdown()
			return l.fatal
		}
		select {
		case <-ctx.Done():
			l.shutdown()
			return nil
		case ev := <-l.events:
			l.handle(ev)
		case <-poll.C:
			l.refresh()
		case <-l.dialTimer.C:
		case <-l.rateTimer.C:
		case <-l.annTimer.C:
		}
	}
}

// step does what is due after any event: connect, send, watch the stream,
// save the cursor, publish stats.
// Scheduling (timers, retries, rate limits) runs on the real clock;
// Options.Now only dates the lag.
func (l *loop) step() {
	now := time.Now()
	if l.fatal == nil && l.sess == nil && !now.Before(l.nextDial) {
		l.startSession()
	}
	l.pump(now)
	l.watchdog()
	l.maybeSave(now, len(l.events) == 0)
	l.publish(l.o.Now())
}

// shutdown ends the session and saves the cursor.
func (l *loop) shutdown() {
	if l.sess != nil {
		l.teardown(context.Canceled)
	}
	l.maybeSave(time.Now(), true)
	l.publish(l.o.Now())
}

// refresh lists the node's segments and applies the budget.
func (l *loop) refresh() {
	all := l.src.WALSegments()
	l.segs, l.chain = l.segs[:0], l.chain[:0]
	l.openSeq, l.openB, l.newest, l.maxSeq = 0, 0, 0, 0
	for i, s := range all {
		l.maxSeq = max(l.maxSeq, s.Seq)
		if s.Sealed {
			l.newest = max(l.newest, s.Seq)
		} else if i == len(all)-1 {
			l.openSeq, l.openB = s.Seq, s.Bytes
		}
		if s.Seq <= l.cur.Released {
			continue
		}
		l.chain = append(l.chain, s)
		if s.Sealed {
			l.segs = append(l.segs, s)
		}
	}
	if l.maxSeq != 0 && l.maxSeq <= l.cur.Released {
		l.fatal = fmt.Errorf("%w: the node's newest segment is %d, the cursor %s released through %d (WAL directory replaced?)",
			ErrSequenceReset, l.maxSeq, l.o.CursorPath, l.cur.Released)
		l.log.Error("replication stopped", "err", l.fatal)
		return
	}
	l.noteListed(all)
	l.enforceBudget()
	if l.sess != nil && l.sess.welcomed {
		l.declareMissing()
	}
}

// advance moves cur.Released through the covered numbers, and drops
// what it passed from the bookkeeping.
func (l *loop) advance() {
	r := l.cov.Through(l.cur.Released)
	if r <= l.cur.Released {
		return
	}
	l.cur.Released = r
	l.dirty = true
	l.cov.TrimThrough(r)
	for seq := range l.retry {
		if seq <= r {
			delete(l.retry, seq)
		}
	}
	k := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].Seq > r })
	l.segs = l.segs[k:]
	k = sort.Search(len(l.chain), func(i int) bool { return l.chain[i].Seq > r })
	l.chain = l.chain[k:]
}

// ackedThrough takes the cloud's acked_through.
func (l *loop) ackedThrough(w uint64) {
	if w <= l.cur.AckedThrough {
		return
	}
	l.cur.AckedThrough = w
	l.dirty = true
	l.forgetSeals(w)
	l.cov.Add(l.cur.Released+1, w)
	for i := range l.cur.Gaps {
		if g := &l.cur.Gaps[i]; g.Through <= w && !g.Reported {
			g.Reported = true
			l.gapsChanged = true
		}
	}
}

// addGap records a gap in the cursor and marks its numbers covered.
func (l *loop) addGap(g cursor.Gap) {
	l.cur.AddGap(g)
	l.cov.Add(g.After+1, g.Through)
	l.dirty = true
	l.gapsChanged = true
}

// enforceBudget applies the overflow policy to the sealed segments kept
// for shipping.
func (l *loop) enforceBudget() {
	var retained int64
	for _, s := range l.segs {
		retained += s.Bytes
	}
	budget := l.o.BudgetBytes
	if l.o.Overflow == OverflowBlockWriters {
		switch {
		case retained > budget && !l.s.blocked.Load():
			l.s.blocked.Store(true)
			l.log.Warn("replication backlog over its disk budget: refusing writes until it ships", "retained_bytes", retained, "budget_bytes", budget)
		case retained <= budget/10*9 && l.s.blocked.Load():
			l.s.blocked.Store(false)
			l.log.Info("replication backlog back under budget: accepting writes", "retained_bytes", retained)
		}
		return
	}
	if retained <= budget {
		return
	}
	reason := cursor.ReasonBacklogOverflow
	if l.o.Overflow == OverflowDropOldest {
		reason = cursor.ReasonDropped
	}
	// Release the oldest segments down to 90% of the budget, so that a
	// steady overflow releases in batches rather than one segment a poll.
	target := budget / 10 * 9
	var segs, points int64
	var first, last uint64
	for _, s := range l.segs {
		if retained <= target {
			break
		}
		retained -= s.Bytes
		if l.cov.Contains(s.Seq) {
			continue // acknowledged already; released as Released passes it
		}
		if base := l.cov.Through(l.cur.Released); s.PrevSeq > base {
			l.addGap(l.missingGap(base, s.PrevSeq))
		}
		l.addGap(cursor.Gap{After: s.PrevSeq, Through: s.Seq, Reason: reason, Segments: 1, Points: s.Points, MinT: s.MinT, MaxT: s.MaxT})
		segs++
		points += s.Points
		if first == 0 {
			first = s.Seq
		}
		last = s.Seq
	}
	l.advance()
	if segs > 0 {
		msg := "replication backlog over its disk budget: released the oldest segments to the node; their points stay in its local store and are recorded as a gap"
		if reason == cursor.ReasonDropped {
			msg = "replication backlog over its disk budget: dropped the oldest segments from replication (drop-oldest policy)"
		}
		l.log.Warn(msg, "first_seq", first, "last_seq", last, "segments", segs, "points", points, "budget_bytes", budget)
	}
}

// declareMissing records as gaps the sequence numbers above Released that
// are neither covered nor on the node's disk: segments deleted before
// replication began, or quarantined as corrupt. A segment covers
// prev_seq+1..seq, so a listed segment whose prev_seq is beyond what is
// covered or listed below it reveals the hole.
func (l *loop) declareMissing() {
	expect := l.cov.Through(l.cur.Released)
	for _, s := range l.chain {
		if s.PrevSeq > expect {
			g := l.missingGap(expect, s.PrevSeq)
			l.log.Warn("segments missing from the node's disk are recorded as a gap (removed before replication began, or quarantined)",
				"after_seq", expect, "through_seq", s.PrevSeq, "points", g.Points, "segments", g.Segments,
				"unrecoverable", g.Unrecoverable)
			l.addGap(g)
		}
		expect = l.cov.Through(max(expect, s.Seq))
	}
	l.advance()
}

// pick chooses the next segment to send: the oldest of the newest
// FreshSegments not yet held, else the oldest of the backlog.
func (l *loop) pick(now time.Time) (wal.SegmentInfo, bool, bool) {
	s := l.sess
	var freshFrom uint64
	if n := l.o.FreshSegments; n > 0 && len(l.segs) > n {
		freshFrom = l.segs[len(l.segs)-n].Seq
	}
	var backlog *wal.SegmentInfo
	var wake time.Time
	for i := range l.segs {
		seg := &l.segs[i]
		if l.cov.Contains(seg.Seq) || s.inflight[seg.Seq] != nil {
			continue
		}
		if !s.reads(seg.Version) {
			l.formatRefused(s, seg)
			continue
		}
		if r, ok := l.retry[seg.Seq]; ok && now.Before(r.notBefore) {
			if wake.IsZero() || r.notBefore.Before(wake) {
				wake = r.notBefore
			}
			continue
		}
		if seg.Seq >= freshFrom {
			return *seg, false, true
		}
		if backlog == nil {
			backlog = seg
		}
	}
	if !wake.IsZero() {
		l.rateTimer.Reset(wake.Sub(now))
	}
	if backlog != nil {
		return *backlog, true, true
	}
	return wal.SegmentInfo{}, false, false
}

// reads reports whether the stream's coordinator reads segments of format
// version v (0, from a SegmentInfo that does not say, is version 1).
func (s *session) reads(v uint8) bool {
	return slices.Contains(s.formats, uint32(max(v, wal.FormatV1)))
}

// formatRefused notes, once a stream, that seg is held back: its
// coordinator does not read its format version. The segment stays on
// disk, and ships on a stream to a coordinator that reads it.
func (l *loop) formatRefused(s *session, seg *wal.SegmentInfo) {
	if s.formatRefused {
		return
	}
	s.formatRefused = true
	l.lastErr = fmt.Sprintf("coordinator %q reads WAL segment formats %v, not format %d: segments of that format wait on disk until the coordinators are upgraded (or run the node with --wal-format 1)",
		s.coordinator, s.formats, seg.Version)
	l.log.Error("replication held back: the coordinator does not read this node's WAL segment format",
		"coordinator", s.coordinator, "coordinator_formats", s.formats, "seq", seg.Seq, "format", seg.Version)
}

// pump hands the sender the next gap declaration or segment, if the
// window, the rate limits and the retry delays allow.
func (l *loop) pump(now time.Time) {
	s := l.sess
	if s == nil || !s.welcomed || s.sending {
		return
	}
	// First: announcements are small and make new series queryable.
	if l.pumpAnnounce(s, now) {
		return
	}
	for i := range l.cur.Gaps {
		g := l.cur.Gaps[i]
		if g.Reported || s.gapsInflight[g.Through] {
			continue
		}
		if at, ok := l.gapRetry[g.Through]; ok && now.Before(at) {
			continue
		}
		s.gapsInflight[g.Through] = true
		l.send(s, &outgoing{msgs: []*pb.ShipRequest{{Body: &pb.ShipRequest_Gap{Gap: &pb.ShipGap{
			NodeId: l.nodeID, AfterSeq: g.After, ThroughSeq: g.Through, Reason: pb.GapReason(g.Reason),
			Segments: g.Segments, Points: g.Points, MinTimeMs: g.MinT, MaxTimeMs: g.MaxT,
		}}}}})
		return
	}
	if l.pumpReshipNote(s) {
		return
	}
	if len(s.inflight) >= l.o.WindowSegments || len(s.inflight) > 0 && s.inflightB >= l.o.WindowBytes {
		return
	}
	seg, backlog, ok := l.pick(now)
	if !ok {
		// Lowest priority: backfills of gaps from the node's store, then
		// runs the cloud asked to ship again.
		if !l.pumpBackfill(s, now) {
			l.pumpReship(s, now)
		}
		return
	}
	wait := l.rateAll.Delay(now)
	if backlog {
		wait = max(wait, l.rateBack.Delay(now))
	}
	if wait > 0 {
		l.rateTimer.Reset(wait)
		return
	}
	file, info, err := l.src.ReadWALSegment(seg.Seq)
	if err != nil {
		l.unreadable(seg, err, now)
		return
	}
	file, info, compacted := l.compact(file, info)
	enc, err := l.encode(s, info, file)
	if err != nil {
		l.unreadable(seg, err, now)
		return
	}
	f := &flight{seq: seg.Seq, prev: info.PrevSeq, points: info.Points, compacted: compacted,
		span: l.startShip(seg.Seq, enc, info.Points, backlog)}
	l.sendSegment(s, f, enc, backlog, now)
}

// sendSegment sends an encoded segment on s and tracks it in flight as f
// (with enc's size), after taking it from the rate budget of all shipping
// and, for a backlog, from the backlog's too.
func (l *loop) sendSegment(s *session, f *flight, enc wire.Encoded, backlog bool, now time.Time) {
	l.rateAll.Take(enc.CompressedBytes, now)
	if backlog {
		l.rateBack.Take(enc.CompressedBytes, now)
	}
	msgs := make([]*pb.ShipRequest, len(enc.Parts))
	for i, p := range enc.Parts {
		msgs[i] = &pb.ShipRequest{Body: &pb.ShipRequest_Segment{Segment: p}}
	}
	f.bytes = enc.CompressedBytes
	s.inflight[f.seq] = f
	s.inflightB += enc.CompressedBytes
	l.sends++
	l.send(s, &outgoing{seq: f.seq, msgs: msgs})
}

// compact returns the form in which WAL segment file is shipped: compacted
// (segment.Compact), and then compacted is true, unless
// Options.ShipAsWritten, or the cloud refused the compacted form as a
// conflict (it holds the segment as written, shipped by an earlier
// version whose acknowledgement was lost), or the segment does not
// compact. A segment that fails to compact is shipped as written: the
// cloud verifies it and refuses damage by itself.
func (l *loop) compact(file []byte, info wal.SegmentInfo) ([]byte, wal.SegmentInfo, bool) {
	if l.o.ShipAsWritten || l.retry[info.Seq].asWritten {
		return file, info, false
	}
	out, ci, ok, err := segment.Compact(file)
	if err != nil {
		l.log.Warn("segment not compacted; shipping it as written", "seq", info.Seq, "err", err)
		return file, info, false
	}
	if !ok {
		return file, info, false
	}
	ci.Path, ci.Created = info.Path, info.Created
	return out, ci, true
}

// encode splits a segment into the parts of a message to session s: at
// most Options.MaxPartBytes each, or the smaller size the coordinator's
// welcome asked for.
func (l *loop) encode(s *session, info wal.SegmentInfo, file []byte) (wire.Encoded, error) {
	part := l.o.MaxPartBytes
	if s.maxPartBytes > 0 {
		part = min(part, s.maxPartBytes)
	}
	return l.enc.Encode(l.nodeID, info, file, part)
}

func (l *loop) send(s *session, out *outgoing) {
	s.sending = true
	s.sendingSeq = out.seq
	s.progress = true
	s.sendCh <- out // capacity 1 and !sending before: never blocks
}

// unreadable handles a segment that cannot be read or encoded.
func (l *loop) unreadable(seg wal.SegmentInfo, err error, now time.Time) {
	l.lastErr = err.Error()
	switch {
	case errors.Is(err, wal.ErrCorrupt), errors.Is(err, fs.ErrNotExist):
		// The file rotted after it was sealed, or vanished (is the node's
		// WALRetention wired to the Shipper?). The node listed it in this
		// process, so its samples reached the store (from the head, or by
		// replay when the node opened): record the gap with what the
		// listing says it held, to be backfilled from the store.
		l.log.Error("sealed segment is damaged or gone and cannot be shipped; recorded as a missing gap, to be re-shipped from the node's store",
			"seq", seg.Seq, "points", seg.Points, "err", err)
		// Only this segment's numbers: the segments below it are listed
		// and shipped on their own (numbers below it that no segment
		// lists are declared by declareMissing). A gap over them would
		// count their points twice once they are held.
		g := cursor.Gap{After: seg.PrevSeq, Through: seg.Seq, Reason: cursor.ReasonMissing, Segments: 1, Points: seg.Points, MinT: seg.MinT, MaxT: seg.MaxT}
		l.judge(&g)
		l.addGap(g)
		l.advance()
	default:
		l.log.Error("read segment failed; will retry", "seq", seg.Seq, "err", err)
		r := l.retry[seg.Seq]
		r.attempts++
		r.notBefore = now.Add(l.retryDelay(r.attempts, true))
		l.retry[seg.Seq] = r
	}
}

func (l *loop) retryDelay(attempts int, retryable bool) time.Duration {
	if !retryable {
		return l.o.BackoffMax
	}
	d := l.o.BackoffInitial
	for i := 1; i < attempts && d < l.o.BackoffMax; i++ {
		d *= 2
	}
	return min(d, l.o.BackoffMax)
}

// startSession opens a stream to the current target.
func (l *loop) startSession() {
	l.sessID++
	ctx, cancel := context.WithCancelCause(l.ctx)
	s := &session{
		id:           l.sessID,
		target:       l.o.Targets[l.target],
		ctx:          ctx,
		cancel:       cancel,
		dead:         make(chan struct{}),
		sendCh:       make(chan *outgoing, 1),
		inflight:     map[uint64]*flight{},
		gapsInflight: map[uint64]bool{},
	}
	// Armed from the start: the welcome must come within AckTimeout.
	s.watch = time.AfterFunc(l.o.AckTimeout, func() { cancel(errAckTimeout) })
	s.armed = true
	l.sess = s
	l.sessions++
	hello := &pb.ShipHello{
		NodeId:          l.nodeID,
		SoftwareVersion: l.o.SoftwareVersion,
		QueryAddr:       l.o.QueryAddr,
		ProtocolVersion: wire.ProtocolVersion,
		AckedThrough:    l.cur.AckedThrough,
		NewestSealedSeq: l.newest,
		Features:        []string{wire.FeatureReship},
		Labels:          helloLabels(l.o.Labels),
	}
	if len(l.segs) > 0 {
		hello.OldestRetainedSeq = l.segs[0].Seq
	}
	s.wg.Add(1)
	go l.runSession(s, hello)
}

// teardown stops listening to the session and waits for its goroutines.
func (l *loop) teardown(cause error) {
	s := l.sess
	s.cancel(cause)
	s.watch.Stop()
	close(s.dead)
	s.wg.Wait()
	endShipSpans(s)
	l.sess = nil
	l.backfillLost()
	l.reshipLost()
}

// watchdog keeps the dead-stream timer running while something is
// outstanding, restarting it on progress.
func (l *loop) watchdog() {
	s := l.sess
	if s == nil {
		return
	}
	outstanding := !s.welcomed || s.sending || len(s.inflight) > 0 || len(s.gapsInflight) > 0
	// Writes are no sign of life when a half-open peer's socket (or a
	// proxy in front of it) keeps absorbing them while nothing comes
	// back: a segment written in full must be answered, or some other
	// answer must come, within AckTimeout.
	wait := l.o.AckTimeout
	if since := s.unansweredSince(); !since.IsZero() {
		if wait -= time.Since(since); wait <= 0 {
			s.cancel(errAckTimeout)
			return
		}
	}
	switch {
	case outstanding && (s.progress || !s.armed):
		s.watch.Reset(wait)
		s.armed = true
	case !outstanding && s.armed:
		s.watch.Stop()
		s.armed = false
	}
	s.progress = false
}

// unansweredSince returns since when the stream owes an answer: the later
// of the oldest full write of a segment still in flight and the latest
// answer; zero when no written segment awaits one.
func (s *session) unansweredSince() time.Time {
	var oldest time.Time
	for _, f := range s.inflight {
		if !f.writtenAt.IsZero() && (oldest.IsZero() || f.writtenAt.Before(oldest)) {
			oldest = f.writtenAt
		}
	}
	if oldest.IsZero() {
		return oldest
	}
	if s.answeredAt.After(oldest) {
		return s.answeredAt
	}
	return oldest
}

func (l *loop) handle(ev event) {
	s := l.sess
	if ev.sess != s || s == nil {
		return // from a session already torn down
	}
	switch ev.kind {
	case evWelcome:
		s.answeredAt = time.Now()
		l.onWelcome(s, ev.welcome)
		l.onConfig(ev.welcome.GetConfig())
		l.onRuleGroups(ev.welcome.GetRuleGroups())
	case evSent:
		s.sending = false
		s.progress = true
		if f := s.inflight[s.sendingSeq]; f != nil && f.writtenAt.IsZero() {
			f.writtenAt = time.Now()
		}
	case evResponse:
		s.progress = true
		s.answeredAt = time.Now()
		switch b := ev.resp.GetBody().(type) {
		case *pb.ShipResponse_Ack:
			l.onAck(s, b.Ack)
		case *pb.ShipResponse_Error:
			l.onRefusal(s, b.Error)
		case *pb.ShipResponse_Config:
			l.onConfig(b.Config)
		case *pb.ShipResponse_RuleGroups:
			l.onRuleGroups(b.RuleGroups)
		case *pb.ShipResponse_Reship:
			if s.welcomed {
				l.onReship(s, b.Reship)
			}
		case *pb.ShipResponse_Announced:
			l.onAnnounced(s, b.Announced)
		default:
			s.cancel(fmt.Errorf("protocol violation: unknown response %T", ev.resp.GetBody()))
		}
	case evEnded:
		l.onEnded(s, ev.err)
	}
}

// beyondWAL reports whether the cloud claims to cover sequence number seq
// that this node has not sealed: another node uses the id, or the WAL was
// replaced.
func (l *loop) beyondWAL(seq uint64) bool {
	if l.openSeq != 0 {
		return seq >= l.openSeq
	}
	return seq > l.maxSeq
}

func (l *loop) onWelcome(s *session, w *pb.ShipWelcome) {
	if l.beyondWAL(w.GetAckedThrough()) {
		err := fmt.Errorf("coordinator %q says it holds this node's segments through %d, but the node's WAL is only at %d: "+
			"the WAL was replaced or another node uses id %q; not shipping", w.GetCoordinatorId(), w.GetAckedThrough(), l.maxSeq, l.nodeID)
		l.log.Error("replication refused", "err", err)
		s.cancel(err)
		return
	}
	s.welcomed = true
	s.coordinator = w.GetCoordinatorId()
	// A coordinator asking for parts under 1 KiB would have a segment sent
	// as thousands of messages; 1 KiB is the floor of the protocol.
	if m := w.GetMaxPartBytes(); m > 0 {
		s.maxPartBytes = max(int(min(m, 1<<30)), 1024)
	}
	s.maxSegmentBytes = w.GetMaxSegmentBytes()
	if _, ok := l.src.(SeriesSource); ok && l.o.AnnounceInterval > 0 && slices.Contains(w.GetFeatures(), wire.FeatureAnnounce) {
		s.ann = announceState{on: true, from: 1, due: time.Now()}
	}
	s.formats = w.GetSegmentFormats()
	if len(s.formats) == 0 {
		s.formats = []uint32{uint32(wal.FormatV1)}
	}
	if w.GetAckedThrough() < l.cur.AckedThrough {
		l.lastErr = fmt.Sprintf("coordinator %q holds this node's segments through %d, below the %d it acknowledged before", s.coordinator, w.GetAckedThrough(), l.cur.AckedThrough)
		l.log.Error("the cloud acknowledges less than it did before: it lost data, or answered from a stale replica; segments the node already deleted stay missing there",
			"coordinator", s.coordinator, "acked_through", w.GetAckedThrough(), "cursor_acked_through", l.cur.AckedThrough)
	}
	l.ackedThrough(w.GetAckedThrough())
	for i, r := range w.GetHeld() {
		if i >= wire.MaxHeldRuns {
			break
		}
		if r.GetFirstSeq() > r.GetLastSeq() || l.beyondWAL(r.GetLastSeq()) {
			continue // nonsense, or beyond what the node wrote: ignore
		}
		l.cov.Add(r.GetFirstSeq(), r.GetLastSeq())
	}
	l.advance()
	l.declareMissing()
	l.log.Info("replication stream open", "target", s.target, "coordinator", s.coordinator,
		"acked_through", w.GetAckedThrough(), "held_runs", len(w.GetHeld()), "released", l.cur.Released)
}

func (l *loop) onAck(s *session, a *pb.ShipAck) {
	if l.beyondWAL(a.GetAckedThrough()) {
		s.cancel(fmt.Errorf("protocol violation: acked_through %d beyond the node's WAL (%d)", a.GetAckedThrough(), l.maxSeq))
		return
	}
	s.acked = true
	if seq := a.GetSeq(); seq != 0 {
		if f := s.inflight[seq]; f != nil && f.backfill {
			delete(s.inflight, seq)
			s.inflightB -= f.bytes
			l.backfillAcked(f)
			l.releaseRefused()
		} else if f != nil && f.reship {
			delete(s.inflight, seq)
			s.inflightB -= f.bytes
			l.reshipAcked(f)
			l.releaseRefused()
		} else if f != nil {
			delete(s.inflight, seq)
			s.inflightB -= f.bytes
			endShip(f.span, a.GetAckedThrough(), nil)
			l.cov.Add(f.prev+1, seq)
			l.shippedSegs++
			l.shippedBytes += f.bytes
			l.shippedPoints += f.points
			delete(l.retry, seq)
			l.releaseRefused()
		}
	}
	if gt := a.GetGapThrough(); gt != 0 {
		delete(s.gapsInflight, gt)
		for i := range l.cur.Gaps {
			if g := &l.cur.Gaps[i]; g.Through == gt && !g.Reported {
				g.Reported = true
				l.dirty = true
				l.gapsChanged = true
			}
		}
	}
	l.ackedThrough(a.GetAckedThrough())
	l.advance()
}

// releaseRefused makes segments the cloud refused as retryable due at once:
// it just acknowledged a segment, so what stopped it (a replica down) is
// over, and waiting out their backoff would only hold the acknowledged-
// through point back. Their attempt counts stay, so a segment refused
// again still backs off further.
func (l *loop) releaseRefused() {
	for seq, r := range l.retry {
		if r.refused && !r.notBefore.IsZero() {
			r.notBefore = time.Time{}
			l.retry[seq] = r
		}
	}
}

func (l *loop) onRefusal(s *session, m *pb.ShipError) {
	e := wire.FromProto(m)
	l.refusals++
	l.lastErr = e.Error()
	now := time.Now()
	if e.Retryable {
		l.log.Warn("coordinator refused, will resend", "coordinator", s.coordinator, "err", e)
	} else {
		l.log.Error("coordinator refused, not retryable: the segment stays on disk and is offered again after the maximum backoff", "coordinator", s.coordinator, "err", e)
	}
	if f := s.inflight[e.Seq]; e.Seq != 0 && f != nil && f.backfill {
		delete(s.inflight, e.Seq)
		s.inflightB -= f.bytes
		l.backfillRefused(f, e, now)
	} else if e.Seq != 0 && f != nil && f.reship {
		delete(s.inflight, e.Seq)
		s.inflightB -= f.bytes
		l.reshipRefused(f, e, now)
	} else if e.Seq != 0 && f != nil {
		delete(s.inflight, e.Seq)
		s.inflightB -= f.bytes
		endShip(f.span, 0, e)
		r := l.retry[e.Seq]
		if f.compacted && e.Code == pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT {
			// NB: the cloud holds this segment in another form: as
			// written, shipped before compaction existed. The same bytes
			// are a duplicate it acknowledges.
			r.asWritten = true
			l.log.Info("the cloud holds the segment as written; shipping it so", "seq", e.Seq)
		}
		r.attempts++
		r.notBefore = now.Add(l.retryDelay(r.attempts, e.Retryable))
		r.refused = e.Retryable
		l.retry[e.Seq] = r
	}
	if gt := e.GapThrough; gt != 0 && s.gapsInflight[gt] {
		delete(s.gapsInflight, gt)
		l.gapRetry[gt] = now.Add(l.retryDelay(1, e.Retryable))
	}
}

func (l *loop) onEnded(s *session, err error) {
	acked := s.acked
	l.teardown(err)
	l.failures++
	if err == nil {
		err = errors.New("stream ended")
	}
	l.lastErr = err.Error()
	if acked {
		l.backoff.Reset()
	}
	delay := l.backoff.Next()
	l.nextDial = time.Now().Add(delay)
	l.dialTimer.Reset(delay)
	l.log.Warn("replication stream ended; reconnecting", "target", s.target, "err", err, "retry_in", delay.Round(time.Millisecond))
	l.target = (l.target + 1) % len(l.o.Targets)
}

// maybeSave saves the cursor if it changed, at most every saveCoalesce
// unless idle; only a saved cursor moves RetainFrom.
func (l *loop) maybeSave(now time.Time, idle bool) {
	if !l.dirty || (!idle && now.Sub(l.lastSave) < saveCoalesce) || now.Before(l.saveRetryAt) {
		return
	}
	if err := cursor.Save(l.o.FS, l.o.CursorPath, &l.cur); err != nil {
		// RetainFrom stays where it was: the node keeps the segments.
		l.lastErr = err.Error()
		l.saveRetryAt = now.Add(time.Second)
		l.log.Error("saving the replication cursor failed; the node keeps every segment until it succeeds", "err", err)
		return
	}
	l.dirty = false
	l.lastSave = now
	l.s.retainFrom.Store(l.cur.Released + 1)
}

// publish updates the Stats snapshot.
func (l *loop) publish(now time.Time) {
	var st Stats
	st.AckedThrough, st.Released = l.cur.AckedThrough, l.cur.Released
	st.NewestSealed, st.OpenSeq = l.newest, l.openSeq
	st.Target = l.o.Targets[l.target]
	if s := l.sess; s != nil {
		st.Target, st.Connected, st.Coordinator = s.target, s.welcomed, s.coordinator
	}
	oldest := true
	for _, seg := range l.segs {
		st.RetainedBytes += seg.Bytes
		if l.cov.Contains(seg.Seq) {
			continue
		}
		st.BacklogSegments++
		st.BacklogBytes += seg.Bytes
		if oldest && seg.Points > 0 {
			oldest = false
			if lag := now.Sub(time.UnixMilli(seg.MaxT)).Seconds(); lag > 0 {
				st.LagSeconds = lag
			}
		}
	}
	st.LagBytes = st.BacklogBytes + l.openB
	st.WritesBlocked = l.s.blocked.Load()
	st.ShippedSegments, st.ShippedBytes, st.ShippedPoints = l.shippedSegs, l.shippedBytes, l.shippedPoints
	if l.shippedPoints > 0 {
		st.BytesPerPoint = float64(l.shippedBytes) / float64(l.shippedPoints)
	}
	st.Sends, st.Refusals, st.Sessions, st.SessionFailures = l.sends, l.refusals, l.sessions, l.failures
	st.ReshipRequests, st.ReshipsIgnored, st.ReshipsUnavailable = l.reshipRequests, l.reshipIgnored, l.reshipUnavail
	st.ReshippedFromWAL, st.ReshippedRebuilt, st.ReshippedBytes = l.reshipWAL, l.reshipRebuilt, l.reshipBytes
	st.ReshipsQueued = len(l.reships)
	st.BackfillShortfallPoints = l.backfillShortfall
	st.LastError = l.lastErr
	st.AnnouncedSeries, st.RegisteredThroughMs = l.announced, l.registeredMs
	l.s.statsMu.Lock()
	defer l.s.statsMu.Unlock()
	old := &l.s.stats
	if l.gapsChanged {
		// Stats() hands out copies, so the old backing array can be reused.
		st.Gaps = old.Gaps
		st.setGaps(&l.cur)
		l.gapsChanged = false
	} else {
		st.Gaps, st.UnreportedGaps = old.Gaps, old.UnreportedGaps
		st.BackfilledGaps, st.BackfilledPoints = old.BackfilledGaps, old.BackfilledPoints
		st.UnrecoverableGaps, st.UnrecoverablePoints = old.UnrecoverableGaps, old.UnrecoverablePoints
		st.GapSegments, st.GapPoints, st.DroppedPoints = old.GapSegments, old.GapPoints, old.DroppedPoints
	}
	l.s.stats = st
}
