//go:build !linux

package upstream

import "syscall"

// rawRead is read(2) through the syscall package where raw system calls
// are not worth their platform details.
func rawRead(fd uintptr, p []byte) (int, error) { return syscall.Read(int(fd), p) }
