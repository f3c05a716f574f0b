//go:build !linux

package upstream

import (
	"syscall"
	"time"
)

// rawRead is read(2) through the syscall package where raw system calls
// are not worth their platform details.
func rawRead(fd uintptr, p []byte) (int, error) { return syscall.Read(int(fd), p) }

// rawWaits: elsewhere every wait is the poller's.
const rawWaits = false

func rawWait(fd uintptr, d time.Duration) (bool, error) { return false, syscall.ENOSYS }
