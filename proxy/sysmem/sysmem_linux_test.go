package sysmem

import (
	"syscall"
	"testing"
)

// TestMachine: what bounds a payload held in memory without maxmemory
// is the machine's memory, or less (a cgroup's limit): above zero, and no
// more than the kernel's own figure of its RAM (sysinfo).
func TestMachine(t *testing.T) {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	ram := int64(si.Totalram) * int64(si.Unit)
	if got := Machine(); got <= 0 || got > ram {
		t.Fatalf("Machine() = %d; want above 0 and at most the machine's %d", got, ram)
	}
}
