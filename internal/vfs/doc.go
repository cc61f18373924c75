// Package vfs is the file-system seam of everything that must survive a
// power cut: the write-ahead log and its state file (node/wal), the raft
// log and its snapshots (coordinator/internal/raftlog), the replicator's
// cursor, segment summaries and restore marker, the coordinator's member
// file and the node's store-damage record. They do their file I/O through
// the small FS and File interfaces: OS is the real file system, and
// CrashFS an in-memory one that remembers what was fsynced and can
// simulate a power cut, so that one crash model reaches every durable
// file.
//
// The seam is narrow on purpose. Files are only ever appended to (or
// truncated), read with ReadAt, and fsynced; directories are listed, and
// their entries made durable with SyncDir.
//
// # What a power cut keeps
//
// A file's bytes are durable once the file is fsynced; its name (a
// creation, rename or removal) once its directory is fsynced. The two are
// independent: a journaling file system may commit a rename before the
// renamed file's data, or keep the data and lose the rename. CrashFS
// models exactly this (see CrashFS), so a missing fsync of either kind
// shows up as lost or torn data in a crash test.
//
// # The helpers
//
// The durable writes every owner needs are written once here:
//
//   - WriteFileAtomic replaces a small file whole: it writes <name>.tmp,
//     fsyncs it, renames it over name and fsyncs the directory. Without
//     the file fsync, a power cut after the rename reached the disk can
//     leave name empty or holding a torn prefix; without the directory
//     fsync, the rename itself can be undone, bringing back the old
//     contents after the caller was told they were replaced. A reader
//     sees the old contents or the new ones whole, never a mix, and a
//     leftover <name>.tmp is a write that never happened (owners ignore
//     or remove it).
//   - MkdirAllDurable creates a directory so that it survives a power
//     cut: the parent of every directory it creates is fsynced.
//   - ReadFile reads a whole file through the seam, refusing one larger
//     than the caller's bound before allocating for it.
//
// Records appended to a log (the WAL, the raft log, the segment
// summaries) stay their owners' business: append, fsync the file, and
// fsync the directory of a new file before anything in it counts as
// durable.
//
// # Concurrency
//
// OS and CrashFS are safe for concurrent use; a File is used by one
// goroutine at a time. The helpers keep no state, but two writes of the
// same name at once share its temporary file: callers serialise the
// writes of one file.
package vfs
