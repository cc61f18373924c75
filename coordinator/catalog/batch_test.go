package catalog

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
)

// batchSeed is a RecordBatch seed for the fuzz targets: one record of
// every kind a batch carries, over edges the seeded streams register.
var batchSeed = RecordBatch{Records: []Command{
	RegisterSeries{Edge: "pi-1", Series: []labels.Labels{labels.FromStrings("__name__", "m0", "host", "h1")}},
	RecordHeld{Edge: "pi-1", Ranges: []HeldRange{{FirstSeq: 40, LastSeq: 41, Points: 8, MinTimeMs: 4000, MaxTimeMs: 4199}}},
	RecordHeld{Edge: "pi-2", Epoch: 3, Holders: []string{"c1", "c2"}, Ranges: []HeldRange{{FirstSeq: 50, LastSeq: 50, Points: 1, MinTimeMs: 5000, MaxTimeMs: 5000}}},
	RecordReplicated{Edge: "pi-2", Replica: "c3", PlacedIndex: 4, Ranges: []SeqRange{{50, 50}}},
	gapSeed,
}}

func TestRecordBatch_RoundTripsItsEncoding(t *testing.T) {
	b := EncodeCommand(batchSeed)
	c, err := DecodeCommand(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, batchSeed) {
		t.Fatalf("decoded %+v", c)
	}
	// EncodeRecordBatch writes the same bytes from encoded commands.
	var enc [][]byte
	for _, r := range batchSeed.Records {
		enc = append(enc, EncodeCommand(r))
	}
	b2, err := EncodeRecordBatch(enc)
	if err != nil || !bytes.Equal(b2, b) {
		t.Fatalf("EncodeRecordBatch: %v\n got  %x\n want %x", err, b2, b)
	}
	for n := range len(b) {
		if _, err := DecodeCommand(b[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: decoded", n)
		}
	}
}

func TestEncodeRecordBatch_RefusesWhatABatchDoesNotCarry(t *testing.T) {
	for name, cmds := range map[string][][]byte{
		"none":       nil,
		"heartbeat":  {EncodeCommand(Heartbeat{Beats: []Beat{{ID: "pi-1", TimeMs: 1}}})},
		"batch":      {EncodeCommand(batchSeed)},
		"short":      {{CommandVersion}},
		"version 2":  {{CommandVersion + 1, byte(KindRecordHeld)}},
		"too many":   slices.Repeat([][]byte{EncodeCommand(gapSeed)}, MaxBatchRecords+1),
		"one of two": {EncodeCommand(gapSeed), EncodeCommand(RemoveNode{ID: "pi-1"})},
	} {
		if _, err := EncodeRecordBatch(cmds); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

// A hostile or damaged batch is rejected as a whole by DecodeCommand,
// before anything of it is allocated for from its counts.
func TestDecodeCommand_RecordBatchBounds(t *testing.T) {
	head := []byte{CommandVersion, byte(KindRecordBatch)}
	gapBody := EncodeCommand(gapSeed)[2:]
	item := func(k Kind, body []byte) []byte { return appendBatchRecord(nil, k, body) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	uv := func(v uint64) []byte { return appendUvarint(nil, v) }
	cases := map[string]struct {
		b    []byte
		want string
	}{
		"empty":          {cat(head, uv(0)), "empty batch"},
		"hostile count":  {cat(head, uv(1<<40), item(KindRecordGap, gapBody)), "count"},
		"count past end": {cat(head, uv(3), item(KindRecordGap, gapBody)), ""},
		"too many":       {cat(head, uv(MaxBatchRecords+1), bytes.Repeat(item(KindRecordGap, gapBody), MaxBatchRecords+1)), "limit"},
		"heartbeat":      {cat(head, uv(1), item(KindHeartbeat, EncodeCommand(Heartbeat{})[2:])), "does not carry"},
		"nested":         {cat(head, uv(1), item(KindRecordBatch, EncodeCommand(batchSeed)[2:])), "does not carry"},
		"unknown kind":   {cat(head, uv(1), item(Kind(200), gapBody)), "does not carry"},
		"body trailing":  {cat(head, uv(1), item(KindRecordGap, cat(gapBody, []byte{0}))), "trailing"},
		"body short":     {cat(head, uv(1), item(KindRecordGap, gapBody[:len(gapBody)-1])), "record 0"},
		"len past end":   {cat(head, uv(1), []byte{byte(KindRecordGap)}, uv(uint64(len(gapBody)+1)), gapBody), "runs past"},
		"batch trailing": {cat(head, uv(1), item(KindRecordGap, gapBody), []byte{0}), "trailing"},
	}
	for name, tc := range cases {
		_, err := DecodeCommand(tc.b)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", name, err, tc.want)
		}
	}
	if _, err := DecodeCommand(cat(head, uv(1), item(KindRecordGap, gapBody))); err != nil {
		t.Fatalf("a batch of one: %v", err)
	}
}

// Each record of a batch applies as it would alone: a rejected record has
// its own error and changes nothing, the others apply, and the catalog
// ends byte for byte as if the records had been applied one by one.
func TestFSM_RecordBatchAppliesEachRecordOnItsOwn(t *testing.T) {
	setup := func() *FSM {
		f := newCatalogWithEdges(t, "pi-1", "pi-2")
		applyOK(t, f, 3, RecordHeld{Edge: "pi-1", Ranges: []HeldRange{held(1, 4)}})
		return f
	}
	records := []Command{
		RecordHeld{Edge: "pi-1", Ranges: []HeldRange{held(5, 5)}},
		RecordHeld{Edge: "pi-1", Ranges: []HeldRange{held(3, 6)}}, // overlaps a held run
		RecordHeld{Edge: "pi-9", Ranges: []HeldRange{held(1, 1)}}, // not registered
		RegisterSeries{Edge: "pi-2", Series: []labels.Labels{series("__name__", "cpu"), {{Name: "bad name", Value: "x"}}}},
		RecordHeld{Edge: "pi-2", Ranges: []HeldRange{held(1, 2)}},
		RecordHeld{Edge: "pi-1", Ranges: []HeldRange{held(5, 5)}}, // a replay inside the batch
		RecordGap{Edge: "pi-2", Gaps: []GapRange{gap(2, 4, GapDropped)}},
	}
	f := setup()
	res := applyOK(t, f, 10, RecordBatch{Records: records}).(RecordBatchResult)
	if len(res.Records) != len(records) {
		t.Fatalf("%d results for %d records", len(res.Records), len(records))
	}
	one, alone := setup(), make([]RecordResult, len(records))
	for i, r := range records {
		alone[i].Result, alone[i].Err = one.Apply(10, EncodeCommand(r))
	}
	if !reflect.DeepEqual(res.Records, alone) {
		t.Fatalf("batch results\n %+v\nalone\n %+v", res.Records, alone)
	}
	if !bytes.Equal(f.Snapshot(), one.Snapshot()) {
		t.Fatal("a batch left another catalog than its records applied one by one")
	}
	for i, class := range map[int]error{1: ErrConflict, 2: ErrNotFound} {
		if !errors.Is(res.Records[i].Err, class) {
			t.Errorf("record %d: %v, want %v", i, res.Records[i].Err, class)
		}
	}
	if r := res.Records[0].Result.(RecordHeldResult); r.Added != 1 || r.AckedThrough != 5 {
		t.Errorf("record 0: %+v", r)
	}
	if r := res.Records[5].Result.(RecordHeldResult); r.Duplicates != 1 {
		t.Errorf("record 5 (replay): %+v", r)
	}
	if r := res.Records[3].Result.(RegisterSeriesResult); r.Created != 1 || len(r.Rejected) != 1 {
		t.Errorf("record 3: %+v", r)
	}
	if r := res.Records[6].Result.(RecordGapResult); r.AckedThrough != 4 {
		t.Errorf("record 6: %+v", r)
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

// ApplyCommand refuses, record by record, what a decoded batch cannot
// hold: a batch or another kind inside a batch built in code.
func TestFSM_RecordBatchRejectsOtherKindsOneByOne(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	res, err := f.ApplyCommand(2, RecordBatch{Records: []Command{
		RemoveNode{ID: "pi-1"},
		batchSeed,
		nil,
		RecordHeld{Edge: "pi-1", Ranges: []HeldRange{held(1, 1)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rs := res.(RecordBatchResult).Records
	for i := range 3 {
		if !errors.Is(rs[i].Err, ErrBadCommand) {
			t.Errorf("record %d: %v, want a bad command", i, rs[i].Err)
		}
	}
	if rs[3].Err != nil {
		t.Fatalf("record 3: %v", rs[3].Err)
	}
	if _, ok := f.Node("pi-1"); !ok {
		t.Fatal("a RemoveNode inside a batch applied")
	}
}

// A batch applied a second time, after other commands, changes nothing:
// raftnode may re-propose it after a leader change.
func TestFSM_RecordBatchAppliedTwiceChangesNothing(t *testing.T) {
	f := New()
	addCoordinator(t, f, 1, "c1", 1)
	addCoordinator(t, f, 2, "c2", 2)
	applyOK(t, f, 3, RegisterNode{ID: "pi-1", Role: RoleEdge})
	applyOK(t, f, 4, RegisterNode{ID: "pi-2", Role: RoleEdge})
	pl, _ := f.Placement("pi-1")
	batch := RecordBatch{Records: []Command{
		RegisterSeries{Edge: "pi-1", Series: []labels.Labels{series("__name__", "m")}},
		RecordHeld{Edge: "pi-1", Epoch: pl.Epoch, Holders: pl.Replicas[:1], Ranges: []HeldRange{held(1, 2)}},
		RecordReplicated{Edge: "pi-1", Replica: pl.Replicas[1], PlacedIndex: pl.Holdings[1].Index, Ranges: []SeqRange{{1, 2}}},
		RecordGap{Edge: "pi-2", Gaps: []GapRange{gap(0, 3, GapMissing)}},
	}}
	if !f.Reproposable(EncodeCommand(batch)) {
		t.Fatal("a record batch is not reproposable")
	}
	applyOK(t, f, 5, batch)
	applyOK(t, f, 6, RecordHeld{Edge: "pi-1", Ranges: []HeldRange{held(3, 3)}})
	applyOK(t, f, 7, Heartbeat{Beats: []Beat{{ID: "pi-1", TimeMs: 9}}})
	before := stripApplied(t, f.Snapshot())
	applyOK(t, f, 8, batch)
	if !bytes.Equal(before, stripApplied(t, f.Snapshot())) {
		t.Fatal("a batch applied twice changed the catalog")
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

// Random streams of every command, with runs of batchable commands
// packed into batches, leave the catalog as the same commands applied
// one by one at the same indexes.
func TestFSM_RandomBatchesSameSnapshotAsOneByOne(t *testing.T) {
	for seed := range uint64(10) {
		cmds := randomCommands(seed, 400)
		batched, single := New(), New()
		index := uint64(1)
		apply := func(f *FSM, c Command) {
			if m, ok := c.(membershipCmd); ok {
				if err := f.ApplyMembership(index, Membership{Voters: m.voters}); err != nil {
					t.Fatal(err)
				}
				return
			}
			if _, err := f.Apply(index, EncodeCommand(c)); err != nil {
				var ce *CommandError
				if !errors.As(err, &ce) {
					t.Fatalf("seed %d: %v", seed, err)
				}
			}
		}
		for i := 0; i < len(cmds); index++ {
			var run []Command
			for i < len(cmds) && Batchable(cmds[i].Kind()) && len(run) < 1+int(seed%7) {
				run = append(run, cmds[i])
				i++
			}
			if len(run) == 0 {
				apply(batched, cmds[i])
				apply(single, cmds[i])
				i++
				continue
			}
			apply(batched, RecordBatch{Records: run})
			for _, c := range run {
				apply(single, c)
			}
		}
		if !bytes.Equal(batched.Snapshot(), single.Snapshot()) {
			t.Fatalf("seed %d: batched and one-by-one snapshots differ", seed)
		}
	}
}

func TestRecordBatchReady_RequiresEveryMemberToReportTheFeature(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	if f.RecordBatchReady() {
		t.Fatal("ready without members")
	}
	applyOK(t, f, 5, RegisterNode{ID: "c1", Role: RoleCoordinator, RaftID: 1, Labels: labels.Labels{{Name: FeaturesLabel, Value: Features}}})
	// c2 applies AnnounceSeries, not RecordBatch (the version before).
	applyOK(t, f, 6, RegisterNode{ID: "c2", Role: RoleCoordinator, RaftID: 2, Labels: labels.Labels{{Name: FeaturesLabel, Value: FeatureAnnounceSeries}}})
	if err := f.ApplyMembership(7, Membership{Voters: []uint64{1, 2}}); err != nil {
		t.Fatal(err)
	}
	if f.RecordBatchReady() || !f.AnnounceReady() {
		t.Fatalf("record batch ready %v, announce ready %v; want false, true", f.RecordBatchReady(), f.AnnounceReady())
	}
	applyOK(t, f, 8, RegisterNode{ID: "c2", Role: RoleCoordinator, RaftID: 2, Labels: labels.Labels{{Name: FeaturesLabel, Value: Features}}})
	if !f.RecordBatchReady() {
		t.Fatal("not ready once every member reports the feature")
	}
}
