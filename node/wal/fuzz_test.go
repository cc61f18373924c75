package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/tributarydb/tributary/internal/vfs"
)

// buildSegment encodes a sealed segment holding recs, the way the Log does.
func buildSegment(seq uint64, recs []Record) []byte {
	b := appendHeader(nil, header{nodeID: "fuzz-node", seq: seq, prevSeq: seq - 1, created: 1})
	var res scanResult
	for _, r := range recs {
		b = appendFrame(b, r)
		res.add(r)
	}
	f := footer{recordStats: res.recordStats, totalBytes: int64(len(b)) + footerBytes}
	crc := crc32.Checksum(b, castagnoli)
	return appendFooter(b, &f, crc)
}

func FuzzReadSegment(f *testing.F) {
	recs := []Record{testRecord(1), testRecord(2), testRecord(96), {}, {Data: []byte("x"), MinT: -5, MaxT: 5, Points: 3}}
	sealed := buildSegment(7, recs)
	f.Add(sealed)
	f.Add(sealed[:len(sealed)-footerBytes]) // unsealed
	f.Add(sealed[:len(sealed)-3])           // torn footer
	f.Add(sealed[:headerFixedBytes+5])      // torn header
	f.Add(buildSegment(1, nil))             // sealed, empty
	f.Add([]byte{})
	f.Add([]byte("TWAL\x01"))
	flipped := bytes.Clone(sealed)
	flipped[len(flipped)/2] ^= 4
	f.Add(flipped)
	if v2, _, err := EncodeSegmentVersion(FormatV2, "fuzz-node", 7, 0, recs); err == nil {
		f.Add(v2)                       // format version 2
		f.Add(v2[:len(v2)-footerBytes]) // unsealed
	}
	f.Add([]byte("TWAL\x03"))

	f.Fuzz(func(t *testing.T, b []byte) {
		cfs := vfs.NewCrashFS()
		if err := cfs.WriteFile("/s.seg", b); err != nil {
			t.Fatal(err)
		}
		var got []Record
		info, err := ReadSegment(cfs, "/s.seg", func(r Record) error {
			if r.MaxT < r.MinT || r.Points < 0 {
				t.Fatalf("invalid record returned: %+v", r)
			}
			r.Data = bytes.Clone(r.Data)
			got = append(got, r)
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ReadSegment = %v, want nil or ErrCorrupt", err)
			}
			return
		}
		if info.Records != int64(len(got)) || info.Bytes != int64(len(b)) || !info.Sealed {
			t.Fatalf("info %+v for %d records in %d bytes", info, len(got), len(b))
		}
		// A segment that verifies holds exactly what its records say.
		var res scanResult
		for _, r := range got {
			res.add(r)
		}
		if info.Points != res.points || info.MinT != res.minT || info.MaxT != res.maxT {
			t.Fatalf("info %+v disagrees with the records", info)
		}
	})
}

func FuzzRecordRoundTrip(f *testing.F) {
	f.Add([]byte("cpu_usage 0.5"), int64(1_700_000_000_000), int64(1_700_000_001_000), int64(2), uint(3))
	f.Add([]byte{}, int64(0), int64(0), int64(0), uint(0))
	f.Add(bytes.Repeat([]byte{0xff}, 300), int64(-1<<63), int64(1<<63-1), int64(1<<63-1), uint(77))
	f.Add([]byte("inverted"), int64(10), int64(9), int64(1), uint(1))
	f.Add([]byte("negative"), int64(0), int64(0), int64(-1), uint(1))

	f.Fuzz(func(t *testing.T, data []byte, minT, maxT, points int64, flip uint) {
		r := Record{Data: data, MinT: minT, MaxT: maxT, Points: points}
		if err := r.check(); err != nil {
			if !errors.Is(err, ErrInvalidRecord) || points >= 0 && maxT >= minT && len(data) <= MaxRecordBytes {
				t.Fatalf("check(%+v) = %v", r, err)
			}
			return
		}
		frame := appendFrame(nil, r)
		if int64(len(frame)) != frameSize(r) {
			t.Fatalf("frame is %d bytes, frameSize says %d", len(frame), frameSize(r))
		}
		seg := buildSegment(3, []Record{r, r})
		var got []Record
		res, err := scanSegment(bytes.NewReader(seg), int64(len(seg)), func(g Record) error {
			g.Data = bytes.Clone(g.Data)
			got = append(got, g)
			return nil
		})
		if err != nil || res.stop != stopFooter {
			t.Fatalf("scan = %v, stop %d %q", err, res.stop, res.reason)
		}
		if !equalRecords(got, []Record{r, r}) {
			t.Fatalf("round trip: got %+v, want %+v twice", got, r)
		}

		// Any single flipped bit in a frame's CRC or body is caught.
		hdrLen := int64(headerFixedBytes + len("fuzz-node"))
		_, k := binary.Uvarint(frame)
		bodyAndCRC := len(frame) - k
		start := hdrLen + int64(k)
		bit := flip % uint(8*bodyAndCRC)
		bad := bytes.Clone(seg)
		bad[start+int64(bit/8)] ^= 1 << (bit % 8)
		res, err = scanSegment(bytes.NewReader(bad), int64(len(bad)), nil)
		if err != nil || res.stop != stopBadFrame || res.records != 0 {
			t.Fatalf("flipped bit %d of the first frame: stop %d %q after %d records, err %v", bit, res.stop, res.reason, res.records, err)
		}
	})
}
