//go:build linux

package cluster

import "syscall"

var sigterm = syscall.SIGTERM

// sysProcAttr puts each server in its own process group, so a Ctrl-C at the
// terminal reaches only the harness (which then stops the servers in order),
// and has the kernel SIGKILL the server if the harness dies without stopping
// it.
//
// NB: Pdeathsig fires when the OS thread that started the child exits; the
// Go runtime retires threads only for goroutines that exit locked with
// runtime.LockOSThread, which the harness never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
