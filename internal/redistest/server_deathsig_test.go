//go:build linux

package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const helperEnv = "REDISTEST_HELPER_SERVER"

// TestHelperServer is not a test: TestServerDiesWithTestBinary runs it in a child test
// binary, which starts a server, prints its pid and waits to be killed.
func TestHelperServer(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process for TestServerDiesWithTestBinary")
	}
	s := StartServer(t)
	fmt.Printf("redis-pid=%d\n", s.Pid())
	time.Sleep(time.Minute)
}

// TestServerDiesWithTestBinary checks that a server does not outlive a test binary that
// dies without running its cleanups (as on a -timeout panic).
func TestServerDiesWithTestBinary(t *testing.T) {
	t.Parallel()
	Require(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServer$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "TMPDIR="+t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	pidc := make(chan int, 1)
	go func() { // ends when the child's stdout closes, at the latest in the cleanup above
		defer close(pidc)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "redis-pid="); ok {
				pid, _ := strconv.Atoi(v)
				pidc <- pid
			}
		}
	}()
	var pid int
	select {
	case pid = <-pidc:
	case <-time.After(StartTimeout):
	}
	if pid <= 0 {
		t.Fatalf("child test binary did not report a redis-server pid")
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // if the test fails below

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	WaitFor(t, 5*time.Second, "redis-server to die with the test binary", func() bool {
		// Without a reaping init the orphan may linger as a zombie ('Z').
		state := processState(pid)
		return state == 0 || state == 'Z' || errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
}
