package store

// verify.cc is C++: the C API of the linked RocksDB has no way to read a
// table file outside a DB. The link flags are scan.go's.

// #cgo CXXFLAGS: -std=c++17
// #include <stdlib.h>
// #include "verify.h"
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// SSTFile is one table file of a store, as Inspect found it.
type SSTFile struct {
	// Name is the file name in the store directory, e.g. "000042.sst".
	Name  string
	Bytes int64
	// ColumnFamily names the column family ("chunks", "series", ...); ""
	// when neither the store nor the file could say.
	ColumnFamily string
	// Level is the LSM level the store's manifest puts the file in; -1
	// when the manifest was not read.
	Level int
	// Entries and Deletions count the file's point entries (deletions
	// included in Entries) and RangeDeletions its range tombstones.
	Entries, Deletions, RangeDeletions uint64
	// Smallest and Largest are the first and last key in the file; nil
	// when unknown.
	Smallest, Largest []byte
	// Damage is why the file failed verification (a block's checksum, a
	// footer that does not parse, a file the manifest names but the
	// directory lacks); nil for an intact file.
	Damage error
}

// verifySST reads the table file at path and checks the checksum of every
// block in it.
func verifySST(path string) SSTFile {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var info C.store_sst_info
	C.store_verify_sst(cpath, &info)
	defer C.store_sst_info_free(&info)
	f := SSTFile{Level: -1}
	if info.column_family != nil {
		f.ColumnFamily = C.GoString(info.column_family)
	}
	f.Entries, f.Deletions, f.RangeDeletions = uint64(info.entries), uint64(info.deletions), uint64(info.range_deletions)
	if info.smallest != nil {
		f.Smallest = C.GoBytes(unsafe.Pointer(info.smallest), C.int(info.smallest_len))
	}
	if info.largest != nil {
		f.Largest = C.GoBytes(unsafe.Pointer(info.largest), C.int(info.largest_len))
	}
	if info.err != nil {
		f.Damage = fmt.Errorf("verify %s: %w", path, errors.New(C.GoString(info.err)))
	}
	return f
}
