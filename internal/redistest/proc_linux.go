package redistest

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// sysProcAttr puts redis-server in its own process group, so that signals reach the
// children it forks (BGSAVE, diskless sync), and has the kernel SIGKILL it if the test
// binary dies without running its cleanups.
//
// NB: Pdeathsig fires when the OS thread that started the child exits, not the process.
// The Go runtime only retires threads of goroutines that exit while locked with
// runtime.LockOSThread, which test goroutines calling StartServer do not do.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// processState returns the state letter of pid from /proc/<pid>/stat ('R', 'S', 'T'
// for stopped, ...), or 0 if it cannot be read.
func processState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The format is "pid (comm) state ..."; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}
