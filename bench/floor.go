package main

// The floors: what the machine itself charges for the bytes a streaming
// row moves, measured in the same run beside the row, so that a relay's CPU
// can be read against the cost no relay can go under.
//
//   - The send floor: the same volume written with writev to N loopback
//     sockets whose readers drain them, CPU of the sending threads alone.
//     It is the same volume, not the same stream bytes: the kernel's copy
//     does not look at the bytes, and the write sizes are the cheapest a
//     relay of 16 KiB blocks can make (64 blocks, 1 MiB, per writev, as
//     replbuf's BenchmarkRawWritev and a cursor's full batch), whatever the
//     value size; a relay's writes are as large as it is behind, not as the
//     primary's commands. What a relay pays above it is its own work:
//     reading the primary, parsing, waking up, writing small batches.
//   - The disk floor: dd of the same number of bytes into the proxy's dir
//     (the same file system the log writes), over a file allocated
//     beforehand (fallocate, dd conv=notrunc), once through the page cache
//     and once with oflag=direct, CPU from dd's own rusage.
//
// Each floor moves at most floorBytes per replica (or of disk), so that it
// stays short: it is a rate, CPU-s per GB, which does not need the row's
// whole volume.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// floorMaxBytes caps the volume of one floor measurement (per replica for
// the send floor).
const floorMaxBytes = 128 << 20

// floorBytes is what each floor of a run moves: the run's stream size,
// at most floorMaxBytes, whole MiB (dd's unit).
func floorBytes(o *options) int64 {
	return min(int64(o.streamMB)<<20, floorMaxBytes)
}

// sendBlock and sendBatch are the send floor's write shape: 16 KiB blocks
// (replbuf.BlockSize), 64 of them (replbuf.DefaultMaxBatchBytes) per writev.
const (
	sendBlock = 16 << 10
	sendBatch = 64
)

// rusageThread is RUSAGE_THREAD (getrusage(2), Linux): the calling thread's
// own CPU, which the syscall package does not name.
const rusageThread = 1

// threadCPU is the calling thread's user and system CPU.
func threadCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// sendFloor writes perReplica bytes to each of n loopback TCP connections
// with writev, from one goroutine per connection locked to its thread, while
// other goroutines drain the far ends, and returns the sending threads' CPU
// (getrusage RUSAGE_THREAD around each sender's loop): the readers' CPU is
// not counted, as a relay's replicas' is not.
func sendFloor(ctx context.Context, n int, perReplica int64) (time.Duration, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("send floor: %w", err)
	}
	defer l.Close()
	var senders, readers []net.Conn
	defer func() {
		for _, c := range append(senders, readers...) {
			c.Close()
		}
	}()
	for range n {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", l.Addr().String())
		if err != nil {
			return 0, fmt.Errorf("send floor: %w", err)
		}
		senders = append(senders, c)
		a, err := l.Accept()
		if err != nil {
			return 0, fmt.Errorf("send floor: %w", err)
		}
		readers = append(readers, a)
	}
	stop := context.AfterFunc(ctx, func() {
		for _, c := range senders {
			c.Close()
		}
	})
	defer stop()

	block := make([]byte, sendBlock)
	var (
		wg    sync.WaitGroup
		cpu   atomic.Int64
		first error
		once  sync.Once
	)
	fail := func(err error) { once.Do(func() { first = err }) }
	for _, c := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close() // a failed reader ends its sender's writes too
			buf := make([]byte, 256<<10)
			got, err := io.CopyBuffer(io.Discard, onlyReader{c}, buf)
			if err != nil {
				fail(fmt.Errorf("send floor: read: %w", err))
			} else if got != perReplica {
				fail(fmt.Errorf("send floor: read %d bytes, want %d", got, perReplica))
			}
		}()
	}
	for _, c := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Closed however the loop ends, so that the reader sees EOF
			// (and wg.Wait returns) after a failed write too.
			defer c.Close()
			// Locked, so that getrusage(RUSAGE_THREAD) sees this loop's
			// system calls and nothing else's.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c0, err := threadCPU()
			if err != nil {
				fail(err)
				return
			}
			iov := make([][]byte, sendBatch)
			for left := perReplica; left > 0; {
				k := min(left/sendBlock, sendBatch)
				bufs := net.Buffers(iov[:0])
				for range k {
					bufs = append(bufs, block)
				}
				if k == 0 { // a tail smaller than a block
					bufs = append(bufs, block[:left])
				}
				w, err := bufs.WriteTo(c)
				if err != nil {
					fail(fmt.Errorf("send floor: writev: %w", err))
					return
				}
				left -= w
			}
			c1, err := threadCPU()
			if err != nil {
				fail(err)
				return
			}
			cpu.Add(int64(c1 - c0))
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return time.Duration(cpu.Load()), first
}

// onlyReader hides a conn's WriterTo, so that io.CopyBuffer reads into the
// given buffer instead of splicing.
type onlyReader struct{ io.Reader }

// diskFloor runs dd of size bytes (whole MiB) into dir over a file allocated
// beforehand, through the page cache (conv=notrunc,fdatasync: the dirty
// pages are written back before the next run starts) and with oflag=direct,
// and returns dd's CPU (user + system, from its rusage) for each. Each dd
// writes its own fresh fallocated file, so both pay the same: blocks
// allocated, extents converted from unwritten as they are written (as a
// preallocated log segment's are on its first pass). dd also reads
// /dev/zero, which costs it a clear of each buffer: a little more than the
// disk alone.
func diskFloor(ctx context.Context, dir string, size int64) (buffered, direct time.Duration, err error) {
	for _, m := range []struct {
		dst  *time.Duration
		name string
		args []string
	}{
		{&buffered, "dd-floor-buffered", []string{"conv=notrunc,fdatasync"}},
		{&direct, "dd-floor-direct", []string{"conv=notrunc", "oflag=direct"}},
	} {
		if *m.dst, err = ddOnce(ctx, filepath.Join(dir, m.name), size, m.args); err != nil {
			return 0, 0, err
		}
	}
	return buffered, direct, nil
}

func ddOnce(ctx context.Context, path string, size int64, args []string) (time.Duration, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, fmt.Errorf("disk floor: %w", err)
	}
	defer os.Remove(path)
	err = syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("disk floor: fallocate %s: %w", path, err)
	}
	cmd := exec.CommandContext(ctx, "dd", append([]string{"if=/dev/zero", "of=" + path, "bs=1M",
		fmt.Sprintf("count=%d", size>>20), "status=none"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("disk floor: dd %v: %w: %s", args, err, out)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, errors.New("disk floor: no rusage for dd")
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
