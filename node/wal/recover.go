package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/tributarydb/tributary/internal/vfs"
)

const quarantineDirName = "quarantine"

// action is what recovery does with a segment file.
type action int

const (
	actKeep       action = iota // sealed and valid
	actSeal                     // unsealed (or its footer damaged) with records: truncate after the last record, seal
	actRemove                   // unsealed without records: remove
	actQuarantine               // damaged: move to quarantine/
)

// plan is recovery's verdict on one segment file.
type plan struct {
	seq    uint64
	name   string
	size   int64
	act    action
	res    scanResult
	offset int64  // actQuarantine: where the damage is
	reason string // actQuarantine: what it is; actSeal: why the tail goes
}

// recover brings the directory to a clean state and opens a new segment.
// It first inspects every segment without changing anything, then
// persists the sequence counter, then applies its verdicts, so that no
// removal or move can let a sequence number be handed out twice.
func (l *Log) recover() error {
	dir := l.opts.Dir
	// Durably: a power cut could otherwise take a new directory's entry,
	// and every acknowledged record in it, away.
	if err := vfs.MkdirAllDurable(countedFS{l}, dir, 0o755); err != nil {
		return fmt.Errorf("create directory: %w", err)
	}
	names, err := l.fs.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list directory: %w", err)
	}
	st, err := l.loadState(names)
	if err != nil {
		return err
	}
	qnames, err := l.fs.ReadDir(l.path(quarantineDirName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("list quarantine: %w", err)
	}

	maxSeen, lastSealed := uint64(0), st.lastSealed
	for _, n := range qnames {
		if seq, ok := parseSeqPrefix(n); ok {
			maxSeen, lastSealed = max(maxSeen, seq), max(lastSealed, seq)
		}
	}
	var plans []plan
	for _, n := range names {
		seq, ok := parseSegmentName(n)
		if !ok {
			continue
		}
		p, err := l.inspect(seq, n)
		if err != nil {
			return err
		}
		plans = append(plans, p)
		// A header naming a later sequence than the file name (a renamed
		// file) counts too: better to skip numbers than to reuse one.
		maxSeen = max(maxSeen, seq, p.res.hdr.seq)
		if p.act != actRemove {
			lastSealed = max(lastSealed, seq)
		}
	}
	next := max(st.next, maxSeen+1)
	if err := l.writeState(next, lastSealed); err != nil {
		return err
	}

	dirty := false
	for i := range plans {
		p := &plans[i]
		if err := l.apply(p); err != nil {
			return err
		}
		dirty = dirty || p.act != actKeep
	}
	if dirty {
		if err := l.syncDir(dir); err != nil {
			return err
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	l.nextSeq, l.lastSealed = next, lastSealed
	w, err := l.createSegmentLocked(lastSealed)
	if err != nil {
		return err
	}
	l.cur = w
	l.durable = Position{Seq: w.seg.info.Seq}
	return nil
}

// inspect reads a segment file and decides what to do with it, changing
// nothing.
func (l *Log) inspect(seq uint64, name string) (plan, error) {
	path := l.path(name)
	p := plan{seq: seq, name: name}
	f, err := l.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return p, fmt.Errorf("open segment %s: %w", path, err)
	}
	defer f.Close()
	if p.size, err = f.Size(); err != nil {
		return p, fmt.Errorf("stat segment %s: %w", path, err)
	}
	claimed, err := claimsSealed(f, p.size)
	if err != nil {
		return p, fmt.Errorf("read segment %s: %w", path, err)
	}
	if p.res, err = scanSegment(f, p.size, nil); err != nil {
		return p, fmt.Errorf("read segment %s: %w", path, err)
	}
	res := &p.res
	quarantine := func(offset int64, reason string) (plan, error) {
		p.act, p.offset, p.reason = actQuarantine, offset, reason
		return p, nil
	}
	if res.stop == stopBadHeader {
		switch {
		case claimed:
			return quarantine(0, res.reason)
		case p.size < headerFixedBytes+int64(len(l.opts.NodeID)):
			// A crash before the header was ever fsynced; no record in
			// this file was acknowledged.
			p.act, p.reason = actRemove, res.reason
			return p, nil
		default:
			return quarantine(0, res.reason+" (unsealed segment)")
		}
	}
	if res.hdr.nodeID != l.opts.NodeID {
		return p, fmt.Errorf("segment %s was written by node %q, not %q: refusing to mix two nodes' data in one log", path, res.hdr.nodeID, l.opts.NodeID)
	}
	if res.hdr.seq != seq {
		return quarantine(0, fmt.Sprintf("header holds sequence %d, file name %d", res.hdr.seq, seq))
	}
	switch res.stop {
	case stopFooter:
		p.act = actKeep
	case stopEOF:
		// Every record is intact; the crash came before the seal.
		p.act = actSeal
		if res.records == 0 {
			p.act = actRemove
		}
	default:
		switch {
		case claimed && res.stop == stopBadFooter && res.end == p.size-footerBytes:
			// A damaged footer behind intact records: the footer
			// holds nothing the records do not, so write it again.
			p.act, p.reason = actSeal, "damaged footer: "+res.reason
		case claimed:
			// Records are fsynced before a footer is written, so damage
			// in front of a footer is not a torn write.
			return quarantine(res.end, res.reason)
		case res.records == 0:
			p.act, p.reason = actRemove, res.reason
		default:
			p.act, p.reason = actSeal, res.reason
		}
	}
	return p, nil
}

// claimsSealed reports whether the last bytes of a file look like a footer
// for a file of this size: then it was sealed, and damage anywhere is
// corruption rather than a torn write.
func claimsSealed(f File, size int64) (bool, error) {
	if size < headerFixedBytes+1+footerBytes {
		return false, nil
	}
	b := make([]byte, footerBytes)
	if _, err := f.ReadAt(b, size-footerBytes); err != nil {
		return false, err
	}
	ft, reason := parseFooter(b)
	return reason == "" && ft.totalBytes == size, nil
}

// apply carries out a plan.
func (l *Log) apply(p *plan) error {
	path := l.path(p.name)
	res := &p.res
	switch p.act {
	case actKeep:
		l.addSegment(res.info(path), res.hdrLen, p.size-footerBytes)
	case actRemove:
		if cut := p.size - res.end; cut > 0 {
			l.torn.Add(1)
			l.logger.Warn("wal: removed unsealed segment without records", "segment", path, "offset", res.end, "bytes_cut", cut, "reason", p.reason)
		} else {
			l.logger.Info("wal: removed empty unsealed segment", "segment", path)
		}
		if err := l.fs.Remove(path); err != nil {
			return fmt.Errorf("remove segment %s: %w", path, err)
		}
	case actSeal:
		f, err := l.fs.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("open segment %s: %w", path, err)
		}
		if cut := p.size - res.end; cut > 0 {
			if err := f.Truncate(res.end); err != nil {
				f.Close()
				return fmt.Errorf("truncate segment %s: %w", path, err)
			}
			l.torn.Add(1)
			l.logger.Warn("wal: truncated torn tail", "segment", path, "offset", res.end, "bytes_cut", cut, "records_kept", res.records, "reason", p.reason)
		}
		ft := footer{recordStats: res.recordStats, totalBytes: res.end + footerBytes}
		b := appendFooter(make([]byte, 0, footerBytes), &ft, res.crc)
		// Fsync before the footer even if nothing was cut: the records
		// may never have been fsynced before the crash.
		if err := l.sealFile(f, path, true, b); err != nil {
			f.Close()
			return err
		}
		res.stop, res.footer = stopFooter, ft
		l.addSegment(res.info(path), res.hdrLen, res.end)
	case actQuarantine:
		return l.quarantine(path, p.name, p.offset, p.reason)
	}
	return nil
}

// addSegment records a sealed segment found by recovery.
func (l *Log) addSegment(info SegmentInfo, hdrLen, dataEnd int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.segs = append(l.segs, &segment{info: info, hdrLen: hdrLen, dataEnd: dataEnd})
}

// quarantine moves a damaged file into quarantine/, never deleting it, and
// says so at error level.
func (l *Log) quarantine(path, name string, offset int64, reason string) error {
	qdir := l.path(quarantineDirName)
	if err := l.fs.MkdirAll(qdir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", qdir, err)
	}
	taken, err := l.fs.ReadDir(qdir)
	if err != nil {
		return fmt.Errorf("list %s: %w", qdir, err)
	}
	dest := name
	for i := 1; slices.Contains(taken, dest); i++ {
		dest = name + "." + strconv.Itoa(i)
	}
	dest = filepath.Join(qdir, dest)
	if err := l.fs.Rename(path, dest); err != nil {
		return fmt.Errorf("quarantine %s: %w", path, err)
	}
	// Sync both directories: until then a power cut could undo the move,
	// or half of it.
	if err := l.syncDir(qdir); err != nil {
		return err
	}
	if err := l.syncDir(l.opts.Dir); err != nil {
		return err
	}
	l.quarantined.Add(1)
	l.logger.Error("wal: quarantined corrupt file; its records are not replayed", "file", path, "offset", offset, "reason", reason, "moved_to", dest)
	return nil
}
