// Package procstat reads a process's CPU time, peak memory, context switches
// and system calls from Linux's /proc: /proc/<pid>/stat for CPU (proc(5):
// utime, stime, cutime and cstime, fields 14–17, in clock ticks),
// /proc/<pid>/status for VmHWM, the peak resident set size,
// /proc/<pid>/task/<tid>/status for each thread's context switches, and
// /proc/<pid>/io for the read and write system calls of all its threads.
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
	"io/fs"
	"os"
	"path/filepath"
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
	f, err := fields(status, "VmHWM")
	if err != nil {
		return 0, err
	}
	v := bytes.Fields(f[0])
	if len(v) != 2 || string(v[1]) != "kB" {
		return 0, fmt.Errorf("%w: VmHWM value %q", ErrFormat, f[0])
	}
	kb, err := strconv.ParseInt(string(v[0]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: VmHWM: %v", ErrFormat, err)
	}
	return kb << 10, nil
}

// fields returns the values of the named "name: value" lines of a /proc
// file, in the order asked, or ErrFormat naming the first one missing.
func fields(text []byte, names ...string) ([][]byte, error) {
	out := make([][]byte, len(names))
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		name, value, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		for i, n := range names {
			if string(name) == n {
				out[i] = bytes.Clone(value)
			}
		}
	}
	for i, v := range out {
		if v == nil {
			return nil, fmt.Errorf("%w: no %s line", ErrFormat, names[i])
		}
	}
	return out, nil
}

// ints parses the named integer fields of a /proc file.
func ints(text []byte, names ...string) ([]int64, error) {
	f, err := fields(text, names...)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(f))
	for i, v := range f {
		if out[i], err = strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrFormat, names[i], err)
		}
	}
	return out, nil
}

// Switches are context switches: the times a thread gave up its CPU
// because it blocked (Voluntary: a read with nothing to read, a sleep, a
// futex) or was preempted (Nonvoluntary).
type Switches struct {
	Voluntary, Nonvoluntary int64
}

// Total is both kinds added.
func (s Switches) Total() int64 { return s.Voluntary + s.Nonvoluntary }

// Sub is the switches between an earlier reading and s.
func (s Switches) Sub(earlier Switches) Switches {
	return Switches{Voluntary: s.Voluntary - earlier.Voluntary, Nonvoluntary: s.Nonvoluntary - earlier.Nonvoluntary}
}

// ParseSwitches returns voluntary_ctxt_switches and
// nonvoluntary_ctxt_switches from the text of a status file: one thread's
// in /proc/<pid>/task/<tid>/status (the thread group leader's alone in
// /proc/<pid>/status).
func ParseSwitches(status []byte) (Switches, error) {
	v, err := ints(status, "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")
	if err != nil {
		return Switches{}, err
	}
	return Switches{Voluntary: v[0], Nonvoluntary: v[1]}, nil
}

// ReadSwitches sums the context switches of every thread pid has: the
// status file of each /proc/<pid>/task/<tid>. A thread that exits between
// two readings takes its switches with it, so a difference of two
// readings undercounts by what threads that exited in between had made;
// the servers the harness measures keep their threads.
func ReadSwitches(pid int) (Switches, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return Switches{}, err
	}
	var sum Switches
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "status"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread exited since the listing
		}
		if err != nil {
			return Switches{}, err
		}
		s, err := ParseSwitches(b)
		if err != nil {
			return Switches{}, fmt.Errorf("%s/%s/status: %w", dir, t.Name(), err)
		}
		sum.Voluntary += s.Voluntary
		sum.Nonvoluntary += s.Nonvoluntary
	}
	return sum, nil
}

// IO is a process's count of read and write system calls (syscr and
// syscw of /proc/<pid>/io: read, readv, recvmsg, pread and their kin, and
// write, writev, sendmsg and theirs; not epoll_wait, futex or sleeps), of
// all its threads, those that exited included.
type IO struct {
	ReadCalls, WriteCalls int64
}

// Total is both kinds added.
func (c IO) Total() int64 { return c.ReadCalls + c.WriteCalls }

// Sub is the system calls between an earlier reading and c.
func (c IO) Sub(earlier IO) IO {
	return IO{ReadCalls: c.ReadCalls - earlier.ReadCalls, WriteCalls: c.WriteCalls - earlier.WriteCalls}
}

// ParseIO returns syscr and syscw from the text of /proc/<pid>/io.
func ParseIO(text []byte) (IO, error) {
	v, err := ints(text, "syscr", "syscw")
	if err != nil {
		return IO{}, err
	}
	return IO{ReadCalls: v[0], WriteCalls: v[1]}, nil
}

// ReadIO reads /proc/<pid>/io, which only the process's owner (or root)
// may read.
func ReadIO(pid int) (IO, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return IO{}, err
	}
	return ParseIO(b)
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
