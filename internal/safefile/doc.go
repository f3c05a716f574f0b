// Package safefile holds the two file mechanisms replproxy uses wherever it
// trusts a file in its dir, written once:
//
//   - [OpenRegular]: Lstat, open with O_NONBLOCK, Fstat, same file. A name
//     is opened only while it is a regular file (not a link, a FIFO, a
//     directory), the open never waits on a FIFO planted between the Lstat
//     and the open, and the file opened is the one the Lstat saw (and, when
//     the caller says so, the very file it wrote, of the size it wrote).
//   - [Create] and [Pending.Commit] (with [WriteFile] for small files):
//     temp, fsync, rename, fsync dir. A new file is written under a fresh
//     temporary name created with O_EXCL (a name that exists, a planted link
//     included, is never opened or truncated; another is drawn), synced,
//     closed, renamed over its name (a rename replaces a link without
//     following it) and the directory synced, as hashicorp/raft's
//     FileSnapshotStore sink does. Before the rename, any failure removes
//     the temporary file: nothing of it is left.
//
// Files are reached through an [FS], the few operations the mechanisms
// need, so that both an os.Root ([RootFS]: no name leaves the directory)
// and a package's own file layer (streamlog's, which injects faults in its
// tests) can be used.
//
// # Concurrency
//
// safefile owns no state and has no lock, so it takes no place in any lock
// order. A [Pending] is owned by the goroutine that created it, until
// Commit or Cancel; the functions may be called from any goroutine. Each
// does file I/O, fsync included: a caller that holds a lock across one
// (streamlog's writer lock, which is held across all of the log's writes)
// makes whoever waits for that lock wait for the disk, and says so.
package safefile
