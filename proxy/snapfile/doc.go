// Package snapfile owns replproxy's snapshot files in dir: the one snapshot
// file (FileName) and, when the stream log is on, the metadata beside it
// (MetaName) that lets a restart serve it. It knows how such a file is
// written, described, checked, opened and removed; it decides nothing about
// when a snapshot goes to dir or which one is served (the proxy's payload
// rule and its history do).
//
//   - Create returns a Sink, as hashicorp/raft's FileSnapshotStore does: the
//     bytes go to a new temporary file (O_EXCL, a random name, so nothing
//     planted there is ever opened or truncated); Close fsyncs it and renames
//     it into place in one rename, with the metadata beside it (replid,
//     offset, size, the CRC64 of the whole file computed while writing,
//     itself replaced atomically: temporary file, fsync, rename, fsync of
//     dir); Cancel removes it. CopyFrom writes a complete snapshot from a
//     replbuf cursor, straight from its blocks (one write each: writev is
//     for sockets).
//   - A File is the record of a written file. Open opens it for sending only
//     if dir still holds the very file written (Lstat, O_NONBLOCK open,
//     Fstat, same file and size), and Remove removes it only if the name
//     still refers to it.
//   - Load reads the metadata and verifies the file it describes (a regular
//     file of that size whose CRC64 matches and that the RDB walk,
//     package rdbcheck, accepts: read whole, once), for a restart.
//   - RemoveLeftovers removes what earlier runs left (an unfinished
//     temporary file, a file a restart cannot serve, the names of earlier
//     versions) and nothing else; FreeSpace is what dir's file system still
//     takes.
//
// Every name is chosen here, never taken from the network, and every file
// operation goes through an os.Root opened on dir, so that no name reaches
// outside it, whether by ".." or by a symlink. The two mechanisms, opening
// a name only while it is the regular file seen and writing a new file
// under a temporary name renamed into place, are internal/safefile's, the
// one copy of each that the stream log uses too.
//
// # Goroutines and locks
//
// A Sink is owned by the one goroutine writing it (a spill or persist on
// one of the snapshot Keeper's goroutines, or the upstream link's
// goroutine for a payload that goes to dir as it arrives). A File never
// changes once made and may be read and opened from any goroutine. The
// package has no lock and no goroutine of its own, so it has no place in
// the proxy's lock order; its callers hold no lock across its file I/O but
// the history's, for File.Open in a full sync's plan, which does not block
// (O_NONBLOCK, and a non-regular file is refused).
package snapfile
