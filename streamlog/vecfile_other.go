//go:build !linux

package streamlog

// vecWriter is Linux's writev; elsewhere the log writes slice by slice.
type vecWriter struct{}

func newVecWriter(File) *vecWriter { return nil }

func (*vecWriter) writeBuffers([][]byte) error { return nil }

// preallocate does nothing where fallocate is not available: appends
// allocate as they write.
func preallocate(File, int64) bool { return false }

// datasync is the file's Sync where fdatasync is not at hand.
func datasync(f File) error { return f.Sync() }
