package catalog

import (
	"fmt"
)

// MaxBatchRecords bounds the records of one RecordBatch.
const MaxBatchRecords = 4096

// RecordBatch carries the records of many segments, of any edges, in one
// command: a coordinator's intake gathers the RegisterSeries, RecordHeld,
// RecordGap and RecordReplicated commands its streams make concurrently
// and proposes them together, so that a fleet's segments cost a few raft
// proposals a second, not one each.
//
// Every record is applied as if it were a command of its own, in order,
// at the batch's index: a rejected record changes nothing and has its own
// *CommandError in the result, and the records after it apply. The batch
// itself is never rejected once it decodes. A record of another kind (a
// RecordBatch inside a batch included) is rejected as ErrBadCommand on
// its own. Every kind a batch may carry is Reproposable, so a batch is:
// applying it twice applies each of its records twice. Result:
// RecordBatchResult.
//
// Encoded as kind 18, which coordinators of an earlier version cannot
// decode: propose it only when RecordBatchReady says every member applies
// it (see the package documentation, "Version skew").
type RecordBatch struct {
	Records []Command
}

// RecordBatchResult is the result of a RecordBatch: one entry per record,
// in order.
type RecordBatchResult struct {
	Records []RecordResult
}

// RecordResult is the outcome of one record of a RecordBatch: what Apply
// would have returned for it alone (Err is nil or a *CommandError).
type RecordResult struct {
	Result any
	Err    error
}

// Kind implements Command.
func (RecordBatch) Kind() Kind { return KindRecordBatch }

// Batchable reports whether a RecordBatch may carry a command of kind k.
func Batchable(k Kind) bool {
	switch k {
	case KindRegisterSeries, KindRecordHeld, KindRecordStored, KindRecordGap, KindRecordReplicated:
		return true
	}
	return false
}

func (c RecordBatch) appendBody(b []byte) []byte {
	b = appendUvarint(b, uint64(len(c.Records)))
	for _, r := range c.Records {
		b = appendBatchRecord(b, r.Kind(), r.appendBody(nil))
	}
	return b
}

func appendBatchRecord(b []byte, k Kind, body []byte) []byte {
	b = append(b, byte(k))
	b = appendUvarint(b, uint64(len(body)))
	return append(b, body...)
}

// EncodeRecordBatch encodes a RecordBatch of commands already encoded by
// EncodeCommand (each of a Batchable kind), without decoding them again.
func EncodeRecordBatch(cmds [][]byte) ([]byte, error) {
	if len(cmds) == 0 || len(cmds) > MaxBatchRecords {
		return nil, fmt.Errorf("record batch: %d records, want 1..%d", len(cmds), MaxBatchRecords)
	}
	n := 2 + 10
	for _, c := range cmds {
		n += len(c) + 10
	}
	b := make([]byte, 0, n)
	b = append(b, CommandVersion, byte(KindRecordBatch))
	b = appendUvarint(b, uint64(len(cmds)))
	for i, c := range cmds {
		if len(c) < 2 || c[0] != CommandVersion || !Batchable(Kind(c[1])) {
			return nil, fmt.Errorf("record batch: record %d is not an encoded command of a kind a batch carries", i)
		}
		b = appendBatchRecord(b, Kind(c[1]), c[2:])
	}
	return b, nil
}

// recordBatch reads a RecordBatch: each record's body must decode, as its
// kind's, to its last byte.
func (d *decoder) recordBatch() RecordBatch {
	n := d.count("record", 2)
	if d.err != nil {
		return RecordBatch{}
	}
	switch {
	case n == 0:
		d.failf("an empty batch is not written")
	case n > MaxBatchRecords:
		d.failf("%d records, limit is %d", n, MaxBatchRecords)
	}
	if d.err != nil {
		return RecordBatch{}
	}
	r := RecordBatch{Records: make([]Command, 0, n)}
	for i := 0; i < n && d.err == nil; i++ {
		k := Kind(d.byte())
		at := d.off
		body := d.bytes("record")
		if d.err != nil {
			break
		}
		if !Batchable(k) {
			d.off = at - 1
			d.failf("record %d is a %s, which a batch does not carry", i, k)
			break
		}
		sub := &decoder{b: body, what: k.String()}
		c := sub.body(k)
		if err := sub.finish(); err != nil {
			d.failf("record %d: %v", i, err)
			break
		}
		r.Records = append(r.Records, c)
	}
	return r
}

func (s *state) recordBatch(index uint64, c RecordBatch) RecordBatchResult {
	res := RecordBatchResult{Records: make([]RecordResult, len(c.Records))}
	for i, r := range c.Records {
		if r == nil || !Batchable(r.Kind()) {
			k := KindRecordBatch
			if r != nil {
				k = r.Kind()
			}
			res.Records[i].Err = cmdErr(k, ErrBadCommand, "record %d: a batch does not carry a %s", i, k)
			continue
		}
		res.Records[i].Result, res.Records[i].Err = s.apply(index, r)
	}
	return res
}

// RecordBatchReady reports whether RecordBatch may be proposed: every raft
// member is a registered coordinator whose FeaturesLabel lists
// FeatureRecordBatch (see AnnounceReady for why). Until then the intake
// proposes one command per record.
func (f *FSM) RecordBatchReady() bool { return f.FeatureReady(FeatureRecordBatch) }
