package redistest

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestStartProcessKilledAtCleanup: a process StartProcess started, stopped
// by SIGSTOP, is gone once the subtest that started it has ended, and its
// exit arrives on the channel.
func TestStartProcessKilledAtCleanup(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep command")
	}
	var exited <-chan error
	var pid int
	t.Run("owner", func(t *testing.T) {
		cmd := exec.Command("sleep", "600")
		exited = StartProcess(t, cmd)
		pid = cmd.Process.Pid
		if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	})
	select {
	case err := <-exited:
		if err == nil {
			t.Fatal("sleep 600 exited with status 0: not killed")
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("pid %d still running 10s after its test ended", pid)
	}
}

// TestStartProcessExit: the exit status of a process that ends by itself
// arrives on the channel.
func TestStartProcessExit(t *testing.T) {
	if _, err := exec.LookPath("true"); err != nil {
		t.Skip("no true command")
	}
	select {
	case err := <-StartProcess(t, exec.Command("true")):
		if err != nil {
			t.Fatalf("true exited with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("true did not exit")
	}
}
