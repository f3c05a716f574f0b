// Package procstat reads a process's CPU time and peak memory from Linux's
// /proc: /proc/<pid>/stat for CPU (proc(5): utime, stime, cutime and cstime,
// fields 14–17, in clock ticks) and /proc/<pid>/status for VmHWM, the peak
// resident set size.
//
// cutime and cstime count children that the process has waited for, so a
// redis-server's fork child (the RDB for a full sync) is included once the
// server has reaped it.
package procstat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// TicksPerSecond is USER_HZ, the unit of the CPU fields of /proc/<pid>/stat:
// 100 on every Linux architecture Go supports (the kernel's ABI, whatever its
// internal HZ).
const TicksPerSecond = 100

// ErrFormat is returned for a stat or status file this package cannot read.
var ErrFormat = errors.New("procstat: unexpected format")

// CPU is the CPU time a process has used.
type CPU struct {
	User, System           time.Duration // the process itself (utime, stime)
	ChildUser, ChildSystem time.Duration // its reaped children (cutime, cstime)
}

// Total is all four fields added.
func (c CPU) Total() time.Duration { return c.User + c.System + c.ChildUser + c.ChildSystem }

// Sub is the CPU used between an earlier reading and c.
func (c CPU) Sub(earlier CPU) CPU {
	return CPU{
		User:        c.User - earlier.User,
		System:      c.System - earlier.System,
		ChildUser:   c.ChildUser - earlier.ChildUser,
		ChildSystem: c.ChildSystem - earlier.ChildSystem,
	}
}

// ParseStat parses the one line of /proc/<pid>/stat. The command name (field
// 2) is in parentheses and may itself hold spaces and parentheses, so the
// fields are counted from the last ')'.
func ParseStat(line []byte) (CPU, error) {
	end := bytes.LastIndexByte(line, ')')
	if end < 0 {
		return CPU{}, fmt.Errorf("%w: no ')' in stat line", ErrFormat)
	}
	rest := bytes.Fields(line[end+1:]) // rest[0] is field 3, the state
	const first, last = 14, 17
	if len(rest) < last-2 {
		return CPU{}, fmt.Errorf("%w: %d fields after the command name", ErrFormat, len(rest))
	}
	var ticks [last - first + 1]time.Duration
	for i := range ticks {
		v, err := strconv.ParseUint(string(rest[first+i-3]), 10, 63)
		if err != nil {
			return CPU{}, fmt.Errorf("%w: field %d: %v", ErrFormat, first+i, err)
		}
		ticks[i] = time.Duration(v) * time.Second / TicksPerSecond
	}
	return CPU{User: ticks[0], System: ticks[1], ChildUser: ticks[2], ChildSystem: ticks[3]}, nil
}

// ParseHWM returns VmHWM, in bytes, from the text of /proc/<pid>/status.
func ParseHWM(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		name, value, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok || string(name) != "VmHWM" {
			continue
		}
		f := bytes.Fields(value)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("%w: VmHWM line %q", ErrFormat, sc.Bytes())
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: VmHWM: %v", ErrFormat, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("%w: no VmHWM line", ErrFormat)
}

// ReadCPU reads /proc/<pid>/stat.
func ReadCPU(pid int) (CPU, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return CPU{}, err
	}
	return ParseStat(b)
}

// ReadHWM reads VmHWM from /proc/<pid>/status.
func ReadHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return ParseHWM(b)
}
