//go:build unix && !linux

package redistest

import "syscall"

// sysProcAttr puts redis-server in its own process group, so that signals reach the
// children it forks. Outside Linux there is no Pdeathsig: a test binary killed before
// its cleanups run leaves its servers running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// processState is unknown outside Linux; [Server.Pause] then does not wait for the
// process to stop.
func processState(pid int) byte { return 0 }
