package wal

import (
	"bytes"
	"errors"
	"io/fs"
	"testing"
)

func TestLog_ReadSealedReturnsVerifiedFile(t *testing.T) {
	for _, e := range envs(t) {
		t.Run(e.name, func(t *testing.T) {
			opts := e.options(t)
			opts.MaxSegmentBytes = MinSegmentBytes
			l := mustOpen(t, opts)
			defer mustClose(t, l)
			want := appendSynced(t, l, 0, 40)
			if _, err := l.Cut(); err != nil {
				t.Fatal(err)
			}
			segs := l.Segments()
			if len(segs) < 3 {
				t.Fatalf("%d segments, want several", len(segs))
			}
			var got []Record
			for _, s := range segs {
				if !s.Sealed {
					if _, _, err := l.ReadSealed(s.Seq); !errors.Is(err, ErrNotSealed) {
						t.Fatalf("ReadSealed(open segment %d) = %v, want ErrNotSealed", s.Seq, err)
					}
					continue
				}
				b, info, err := l.ReadSealed(s.Seq)
				if err != nil {
					t.Fatalf("ReadSealed(%d): %v", s.Seq, err)
				}
				if int64(len(b)) != s.Bytes || info.CRC != s.CRC || info.PrevSeq != s.PrevSeq || info.Points != s.Points || info.NodeID != "node-a" {
					t.Fatalf("ReadSealed(%d) = %d bytes, %+v; Segments says %+v", s.Seq, len(b), info, s)
				}
				// The bytes verify by themselves, as a receiver checks them.
				_, err = VerifySegment("shipped", b, func(r Record) error {
					r.Data = bytes.Clone(r.Data)
					got = append(got, r)
					return nil
				})
				if err != nil {
					t.Fatalf("VerifySegment(%d): %v", s.Seq, err)
				}
			}
			if !equalRecords(got, want) {
				t.Fatalf("records read back differ from those appended: %d vs %d", len(got), len(want))
			}
			if _, _, err := l.ReadSealed(9999); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("ReadSealed(unknown) = %v, want fs.ErrNotExist", err)
			}
			first := segs[0].Seq
			if err := l.RemoveBefore(first + 1); err != nil {
				t.Fatal(err)
			}
			if _, _, err := l.ReadSealed(first); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("ReadSealed(removed) = %v, want fs.ErrNotExist", err)
			}
		})
	}
}

func TestLog_ReadSealedDetectsDamage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"flipped bit", func(b []byte) []byte { b[len(b)/2] ^= 1; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }},
		{"grown", func(b []byte) []byte { return append(b, 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := envs(t)[1] // CrashFS: files can be rewritten behind the Log's back
			l := mustOpen(t, e.options(t))
			defer mustClose(t, l)
			appendSynced(t, l, 0, 5)
			if _, err := l.Cut(); err != nil {
				t.Fatal(err)
			}
			s := l.Segments()[0]
			b, err := e.cfs.ReadFile(s.Path)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.cfs.WriteFile(s.Path, tc.damage(b)); err != nil {
				t.Fatal(err)
			}
			_, _, err = l.ReadSealed(s.Seq)
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.Path != s.Path {
				t.Fatalf("ReadSealed of a damaged file = %v, want a *CorruptionError naming %s", err, s.Path)
			}
		})
	}
}

func TestVerifySegment(t *testing.T) {
	sealed := buildSegment(3, []Record{testRecord(1), testRecord(2)})
	for _, tc := range []struct {
		name    string
		b       []byte
		wantErr bool
	}{
		{"sealed", sealed, false},
		{"unsealed", sealed[:len(sealed)-footerBytes], true},
		{"torn footer", sealed[:len(sealed)-1], true},
		{"empty", nil, true},
		{"garbage", []byte("not a segment at all, but long enough to hold a header"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := VerifySegment("x", tc.b, nil)
			if tc.wantErr {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("VerifySegment = %+v, %v; want ErrCorrupt", info, err)
				}
				return
			}
			if err != nil || info.Seq != 3 || info.PrevSeq != 2 || info.Records != 2 || info.NodeID != "fuzz-node" || !info.Sealed {
				t.Fatalf("VerifySegment = %+v, %v", info, err)
			}
		})
	}
}

func FuzzVerifySegment(f *testing.F) {
	sealed := buildSegment(7, []Record{testRecord(1), testRecord(96), {Data: []byte("x"), MinT: -5, MaxT: 5, Points: 3}})
	f.Add(sealed)
	f.Add(sealed[:len(sealed)-3])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := VerifySegment("fuzz", b, nil)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("VerifySegment = %v, want nil or ErrCorrupt", err)
			}
			return
		}
		if info.Bytes != int64(len(b)) || !info.Sealed {
			t.Fatalf("accepted %d bytes as %+v", len(b), info)
		}
	})
}
