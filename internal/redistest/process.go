package redistest

import (
	"os/exec"
	"syscall"
	"testing"
)

// StartProcess starts cmd, a process of the test's own that is not redis-server (the
// proxy's real binary, say), under the rules [StartServer] keeps: its own process
// group, which on Linux the kernel SIGKILLs if the test binary dies without running
// its cleanups, and a cleanup that resumes and kills that group when the test ends.
// It returns the channel on which cmd's exit status arrives, once.
//
// cmd.SysProcAttr is replaced. The caller may signal the process itself
// (cmd.Process.Signal, or syscall.Kill(-cmd.Process.Pid, sig) for the group).
func StartProcess(t testing.TB, cmd *exec.Cmd) <-chan error {
	t.Helper()
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("redistest: start %s: %v", cmd.Path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		// SIGCONT first: a test may have left the group stopped.
		syscall.Kill(-pid, syscall.SIGCONT)
		syscall.Kill(-pid, syscall.SIGKILL)
	})
	return exited
}
