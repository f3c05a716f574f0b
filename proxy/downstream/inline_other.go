//go:build !linux

package downstream

// writevSupported is false where the producer has no non-blocking writev:
// every replica's write loop sends its stream itself.
const writevSupported = false

type writev struct{}

func (*writev) load([][]byte) int          { return 0 }
func (*writev) result() (int, bool)        { return 0, true }
func (*inlineSender) writeFD(uintptr) bool { return true }
