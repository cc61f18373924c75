package binread

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestReader_ReadsWhatWasWritten(t *testing.T) {
	var b []byte
	b = binary.AppendUvarint(b, 300)
	b = append(b, 7)
	b = binary.LittleEndian.AppendUint32(b, 0xdeadbeef)
	b = binary.AppendUvarint(b, 3)
	b = append(b, "abc"...)
	b = binary.AppendUvarint(b, 2)
	b = append(b, 9, 9)
	r := New(b)
	if v := r.Uvarint(); v != 300 {
		t.Errorf("Uvarint = %d, want 300", v)
	}
	if v := r.Byte(); v != 7 {
		t.Errorf("Byte = %d, want 7", v)
	}
	if v := r.Uint32(); v != 0xdeadbeef {
		t.Errorf("Uint32 = %#x, want 0xdeadbeef", v)
	}
	s := r.Bytes("name")
	if string(s) != "abc" || cap(s) != 3 {
		t.Errorf("Bytes = %q (cap %d), want abc (cap 3)", s, cap(s))
	}
	if n := r.Count("item"); n != 2 {
		t.Errorf("Count = %d, want 2", n)
	}
	if rest := r.Rest(); len(rest) != 2 {
		t.Errorf("Rest = %v, want two bytes", rest)
	}
	if err := r.Done(); err == nil || !strings.Contains(err.Error(), "2 trailing bytes") {
		t.Errorf("Done = %v, want 2 trailing bytes", err)
	}
}

func TestReader_FirstProblemSticks(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		read func(*Reader)
		want string
	}{
		{"truncated uvarint", []byte{0x80}, func(r *Reader) { r.Uvarint() }, "bad uvarint"},
		{"truncated varint", []byte{0xff}, func(r *Reader) { r.Varint() }, "bad varint"},
		{"short raw bytes", []byte{1, 2}, func(r *Reader) { r.Next(3) }, "3 bytes wanted, 2 left"},
		{"no byte", nil, func(r *Reader) { r.Byte() }, "unexpected end of input"},
		{"short word", []byte{1, 2, 3}, func(r *Reader) { r.Uint32() }, "4 bytes wanted, 3 left"},
		{"count past the end", []byte{5, 1}, func(r *Reader) { r.Count("id") }, "id count 5 exceeds the 1 bytes left"},
		{"length past the end", []byte{4, 'a'}, func(r *Reader) { r.Bytes("address") }, "address length 4 runs past the end (1 bytes left)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(tc.in)
			tc.read(r)
			if r.Err() == nil || !strings.Contains(r.Err().Error(), tc.want) {
				t.Fatalf("Err = %v, want %q", r.Err(), tc.want)
			}
			first := r.Err()
			if r.Uvarint() != 0 || r.Varint() != 0 || r.Next(0) != nil || r.Byte() != 0 || r.Uint32() != 0 || r.Count("x") != 0 || r.Bytes("x") != nil || r.Rest() != nil {
				t.Error("a read after the problem returned a value")
			}
			r.Fail(errors.New("later"))
			if r.Done() != first {
				t.Errorf("Done = %v, want the first problem %v", r.Done(), first)
			}
		})
	}
}

func TestReader_VarintAndNextReadWhatWasWritten(t *testing.T) {
	vs := []int64{0, 1, -1, 63, -64, 64, -65, math.MaxInt64, math.MinInt64}
	var b []byte
	for _, v := range vs {
		b = binary.AppendVarint(b, v)
	}
	b = append(b, 1, 2, 3)
	r := New(b)
	for _, v := range vs {
		if got := r.Varint(); got != v {
			t.Errorf("Varint = %d, want %d", got, v)
		}
	}
	if got := r.Next(3); string(got) != "\x01\x02\x03" {
		t.Errorf("Next(3) = %v, want [1 2 3]", got)
	}
	if err := r.Done(); err != nil {
		t.Fatal(err)
	}
}

func TestVarintLen_IsTheEncodedLength(t *testing.T) {
	var us []uint64
	for shift := range 64 {
		u := uint64(1) << shift
		us = append(us, u-1, u, u+1)
	}
	us = append(us, math.MaxUint64)
	for _, u := range us {
		if got, want := UvarintLen(u), len(binary.AppendUvarint(nil, u)); got != want {
			t.Errorf("UvarintLen(%d) = %d, want %d", u, got, want)
		}
		for _, v := range []int64{int64(u), -int64(u)} {
			if got, want := VarintLen(v), len(binary.AppendVarint(nil, v)); got != want {
				t.Errorf("VarintLen(%d) = %d, want %d", v, got, want)
			}
		}
	}
}

func TestReader_FailRecordsACallerCheck(t *testing.T) {
	r := New([]byte{2})
	if r.Byte() != 2 {
		t.Fatal("Byte did not read 2")
	}
	want := errors.New("bad flag")
	r.Fail(want)
	if !errors.Is(r.Done(), want) {
		t.Errorf("Done = %v, want %v", r.Done(), want)
	}
}

func FuzzReader_NeverPanicsNorOverreads(f *testing.F) {
	f.Add([]byte{0, 3, 'a', 'b', 'c', 1, 2, 3, 4, 2, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := New(b)
		for i := 0; r.Err() == nil && len(r.Rest()) > 0; i++ {
			before := len(r.Rest())
			switch i % 7 {
			case 0:
				r.Uvarint()
			case 1:
				r.Byte()
			case 2:
				r.Uint32()
			case 3:
				if n := r.Count("item"); r.Err() == nil && n > uint64(before) {
					t.Fatalf("count %d with %d bytes left", n, before)
				}
			case 4:
				if s := r.Bytes("field"); len(s) > before {
					t.Fatalf("%d bytes read with %d left", len(s), before)
				}
			case 5:
				r.Varint()
			case 6:
				if s := r.Next(2); len(s) > before {
					t.Fatalf("%d bytes read with %d left", len(s), before)
				}
			}
			if r.Err() == nil && len(r.Rest()) >= before && i%7 != 3 {
				t.Fatalf("read %d consumed nothing", i)
			}
		}
	})
}
