package procstat

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name string
		line string
		want CPU
		err  bool
	}{
		{
			name: "redis-server",
			line: "4242 (redis-server) S 1 4242 9109 0 -1 4194560 98 0 0 0 250 130 7 3 20 0 5 0 1786830 3133440 380 18446744073709551615\n",
			want: CPU{User: 2500 * time.Millisecond, System: 1300 * time.Millisecond, ChildUser: 70 * time.Millisecond, ChildSystem: 30 * time.Millisecond},
		},
		{
			name: "name with spaces and parentheses",
			line: "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0 5 6 7",
			want: CPU{User: 10 * time.Millisecond, System: 20 * time.Millisecond, ChildUser: 30 * time.Millisecond, ChildSystem: 40 * time.Millisecond},
		},
		{name: "no parenthesis", line: "1 init S 0", err: true},
		{name: "too short", line: "1 (x) S 0 1 1 0 -1 0 0 0 0 0 1 2 3", err: true},
		{name: "not a number", line: "1 (x) S 0 1 1 0 -1 0 0 0 0 0 1 x 3 4", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.line))
			if tt.err {
				if !errors.Is(err, ErrFormat) {
					t.Fatalf("err = %v, want ErrFormat", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseStat = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestCPUSubTotal(t *testing.T) {
	a := CPU{User: 1, System: 2, ChildUser: 3, ChildSystem: 4}
	b := CPU{User: 11, System: 22, ChildUser: 33, ChildSystem: 44}
	if d := b.Sub(a); d.Total() != 100 {
		t.Errorf("Sub.Total = %v", d.Total())
	}
}

func TestParseHWM(t *testing.T) {
	status := "Name:\tredis-server\nVmPeak:\t  100 kB\nVmHWM:\t    2072 kB\nVmRSS:\t 1000 kB\n"
	if got, err := ParseHWM([]byte(status)); err != nil || got != 2072<<10 {
		t.Errorf("ParseHWM = %d, %v", got, err)
	}
	for _, bad := range []string{"Name:\tx\n", "VmHWM:\t12 MB\n", "VmHWM:\tx kB\n"} {
		if _, err := ParseHWM([]byte(bad)); !errors.Is(err, ErrFormat) {
			t.Errorf("ParseHWM(%q) err = %v", bad, err)
		}
	}
}

func TestReadSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := ReadCPU(os.Getpid()); err != nil {
		t.Error(err)
	}
	if hwm, err := ReadHWM(os.Getpid()); err != nil || hwm <= 0 {
		t.Errorf("ReadHWM = %d, %v", hwm, err)
	}
}

func TestParseSwitches(t *testing.T) {
	status := "Name:\treplproxy\nThreads:\t7\nvoluntary_ctxt_switches:\t1200\nnonvoluntary_ctxt_switches:\t34\n"
	got, err := ParseSwitches([]byte(status))
	if err != nil || got != (Switches{Voluntary: 1200, Nonvoluntary: 34}) || got.Total() != 1234 {
		t.Errorf("ParseSwitches = %+v, %v", got, err)
	}
	if d := got.Sub(Switches{Voluntary: 200, Nonvoluntary: 4}); d != (Switches{Voluntary: 1000, Nonvoluntary: 30}) {
		t.Errorf("Sub = %+v", d)
	}
	for _, bad := range []string{"Name:\tx\n", "voluntary_ctxt_switches:\t1\n", "voluntary_ctxt_switches:\tx\nnonvoluntary_ctxt_switches:\t1\n"} {
		if _, err := ParseSwitches([]byte(bad)); !errors.Is(err, ErrFormat) {
			t.Errorf("ParseSwitches(%q) err = %v", bad, err)
		}
	}
}

func TestParseIO(t *testing.T) {
	text := "rchar: 6976\nwchar: 10\nsyscr: 12\nsyscw: 3\nread_bytes: 0\nwrite_bytes: 0\ncancelled_write_bytes: 0\n"
	got, err := ParseIO([]byte(text))
	if err != nil || got != (IO{ReadCalls: 12, WriteCalls: 3}) || got.Total() != 15 {
		t.Errorf("ParseIO = %+v, %v", got, err)
	}
	if d := got.Sub(IO{ReadCalls: 2, WriteCalls: 1}); d != (IO{ReadCalls: 10, WriteCalls: 2}) {
		t.Errorf("Sub = %+v", d)
	}
	if _, err := ParseIO([]byte("rchar: 1\nsyscr: 2\n")); !errors.Is(err, ErrFormat) {
		t.Errorf("no syscw: err = %v", err)
	}
}

// TestReadSwitchesSelf reads the test process, whose threads (the Go
// runtime's) have all switched at least once.
func TestReadSwitchesSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	s, err := ReadSwitches(os.Getpid())
	if err != nil || s.Total() <= 0 {
		t.Errorf("ReadSwitches = %+v, %v", s, err)
	}
	c, err := ReadIO(os.Getpid())
	if err != nil || c.ReadCalls <= 0 {
		t.Errorf("ReadIO = %+v, %v", c, err)
	}
}
