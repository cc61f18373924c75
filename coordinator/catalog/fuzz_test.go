package catalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
)

// FuzzDecodeCommand: decoding never panics, and whatever decodes
// re-encodes to the same bytes (the encoding is canonical), except for
// the earlier layouts a decoder still reads (a set-config without the
// write quorum and dead-after fields): their re-encoding is the current
// layout of the same command, and that one is canonical.
func FuzzDecodeCommand(f *testing.F) {
	for _, c := range randomCommands(1, 30) {
		if _, ok := c.(membershipCmd); !ok {
			f.Add(EncodeCommand(c))
		}
	}
	f.Add([]byte{CommandVersion, byte(KindHeartbeat), 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(EncodeCommand(gapSeed))
	f.Add(EncodeCommand(announceSeed))
	f.Add(EncodeCommand(SetRuleGroup{Group: RuleGroup{Name: "can", Selector: `site="berlin"`, YAML: testGroupYAML}}))
	f.Add(EncodeCommand(DeleteRuleGroup{Name: "can"}))
	f.Add(EncodeCommand(batchSeed))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			return
		}
		got := EncodeCommand(c)
		if bytes.Equal(got, b) {
			return
		}
		if _, old := c.(SetConfig); !old || len(got) <= len(b) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x", b, got)
		}
		c2, err := DecodeCommand(got)
		if err != nil || !reflect.DeepEqual(c2, c) || !bytes.Equal(EncodeCommand(c2), got) {
			t.Fatalf("an earlier layout re-encodes to a different command (%v):\n in  %x\n out %x", err, b, got)
		}
	})
}

// gapSeed is a RecordGap seed for the fuzz targets: several gaps, counts
// known and unknown, over numbers the seeded streams hold.
var gapSeed = RecordGap{Edge: "pi-1", Gaps: []GapRange{
	{AfterSeq: 0, ThroughSeq: 3, Reason: GapBacklogOverflow, Segments: 2, Points: 40, MinTimeMs: 100, MaxTimeMs: 399},
	{AfterSeq: 3, ThroughSeq: 9, Reason: GapMissing, Points: -1},
	{AfterSeq: 12, ThroughSeq: 14, Reason: GapDropped, Segments: 1, Points: 0},
}}

// announceSeed is an AnnounceSeries seed for the fuzz targets: an edge
// the seeded streams register, one they do not, a part without a
// watermark.
var announceSeed = AnnounceSeries{Edges: []EdgeAnnouncement{
	{Edge: "pi-1", ThroughMs: 5000, Series: []labels.Labels{labels.FromStrings("__name__", "m0", "host", "h1")}},
	{Edge: "pi-9", ThroughMs: 1},
	{Edge: "pi-2", ThroughMs: NoWatermark, Series: []labels.Labels{labels.FromStrings("__name__", "new")}},
}}

// FuzzApply: applying arbitrary bytes never panics, rejects with a
// *CommandError, and keeps every invariant.
func FuzzApply(f *testing.F) {
	for _, c := range randomCommands(2, 30) {
		if _, ok := c.(membershipCmd); !ok {
			f.Add(EncodeCommand(c))
		}
	}
	f.Add(EncodeCommand(gapSeed))
	f.Add(EncodeCommand(announceSeed))
	f.Add(EncodeCommand(batchSeed))
	f.Fuzz(func(t *testing.T, b []byte) {
		fsm := New()
		applyStream(t, fsm, randomCommands(5, 40), 1)
		_, err := fsm.Apply(1000, b)
		var ce *CommandError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("error %v is not a *CommandError", err)
		}
		if err := fsm.Check(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzRestore: restoring arbitrary bytes never panics; what restores
// passes Check and re-encodes to the same bytes. The input is a snapshot
// without its checksum, which the target appends, so that mutations reach
// the decoder instead of failing the checksum (TestRestore_RejectsDamage
// covers the checksum).
func FuzzRestore(f *testing.F) {
	for seed := range uint64(4) {
		fsm := New()
		applyStream(f, fsm, randomCommands(seed, 25), 1)
		snap := fsm.Snapshot()
		f.Add(snap[:len(snap)-4])
	}
	snap := New().Snapshot()
	f.Add(snap[:len(snap)-4])
	withGaps := New()
	applyStream(f, withGaps, randomCommands(2, 25), 1)
	applyStream(f, withGaps, []Command{RegisterNode{ID: "pi-1", Role: RoleEdge}, gapSeed}, 100)
	snap = withGaps.Snapshot()
	f.Add(snap[:len(snap)-4])
	applyStream(f, withGaps, []Command{RegisterNode{ID: "pi-2", Role: RoleEdge}, announceSeed}, 200)
	snap = withGaps.Snapshot() // version 5
	f.Add(snap[:len(snap)-4])
	if st, err := decodeSnapshot(withGaps.Snapshot()); err == nil {
		v2 := snapshotV2(f, st) // placements without ReplicaFrom
		f.Add(v2[:len(v2)-4])
	}
	applyStream(f, withGaps, []Command{SetRuleGroup{Group: RuleGroup{Name: "can", Selector: `site="berlin"`, YAML: testGroupYAML}}}, 300)
	snap = withGaps.Snapshot() // version 6
	f.Add(snap[:len(snap)-4])
	if v1, err := os.ReadFile("testdata/snapshot-v1.bin"); err == nil {
		f.Add(v1[:len(v1)-4])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		b := binary.LittleEndian.AppendUint32(slices.Clone(body), crc32.Checksum(body, castagnoli))
		fsm := New()
		if err := fsm.Restore(b); err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("error %v does not wrap ErrCorruptSnapshot", err)
			}
			return
		}
		if err := fsm.Check(); err != nil {
			t.Fatal(err)
		}
		out := fsm.Snapshot()
		if b[4] != SnapshotVersion {
			// An older version is written back as the current one, which
			// must restore to the same bytes.
			if err := fsm.Restore(out); err != nil {
				t.Fatal(err)
			}
			b = out
		}
		if !bytes.Equal(fsm.Snapshot(), b) {
			t.Fatal("restored snapshot re-encodes differently")
		}
	})
}

// A set-config of the first layout (no write quorum, no dead-after), as
// earlier versions proposed it, decodes to the defaults of the new fields.
func TestDecodeCommand_SetConfigFirstLayout(t *testing.T) {
	cfg := FleetConfig{RetentionRawMs: 3_600_000, RollupHourly: true, ReplicationFactor: 2, MaxSeries: 10}
	b := appendConfig([]byte{CommandVersion, byte(KindSetConfig)}, cfg)
	c, err := DecodeCommand(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.(SetConfig).Config; got != cfg {
		t.Fatalf("decoded %+v, want %+v", got, cfg)
	}
}
