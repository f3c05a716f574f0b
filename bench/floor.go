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
//   - The log's floor: dd of the same number of bytes through the page
//     cache (bs=1M, fdatasync) into the proxy's dir (the file system the
//     log writes), plus the CPU of their CRC-32C computed in process: the
//     write and the checksum the log cannot do without. With a full log
//     (recycled segments) the dd overwrites a file already allocated and
//     written; from an empty log it writes a new file.
//
// Each floor moves at most floorBytes per replica (or of log), so that it
// stays short: it is a rate, CPU-s per GB, which does not need the row's
// whole volume.

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
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

// logFloor is the stream log's floor for one run: what writing size bytes
// through the page cache into the proxy's dir and checksumming them cost,
// the two parts the log cannot do without.
type logFloor struct {
	dd  time.Duration // dd's user + system CPU (from its rusage)
	crc time.Duration // the CRC-32C's thread CPU
}

// diskFloor is the log's floor for size bytes (whole MiB) in dir: dd of
// them with bs=1M and fdatasync through the page cache, and the CPU of
// their CRC-32C (crcFloor). overwrite picks the dd: a full log's recycled
// segments are files already allocated and written, so the dd overwrites
// a file written once beforehand (conv=notrunc, the pages it replaces
// already allocated); an empty log's segments are new, so the dd writes a
// new file, allocating its blocks as it goes. fdatasync makes dd wait for
// writeback, so that the next run starts with no dirty pages. dd also reads
// /dev/zero, which costs it a clear of each buffer: a little more than the
// disk alone.
func diskFloor(ctx context.Context, dir string, size int64, overwrite bool) (logFloor, error) {
	var f logFloor
	path := filepath.Join(dir, "dd-floor")
	if _, err := os.Lstat(path); err == nil {
		return f, fmt.Errorf("disk floor: %s exists", path)
	}
	defer os.Remove(path)
	conv := "conv=fdatasync"
	if overwrite {
		// The first pass allocates and writes the file; only the second,
		// over it, is measured.
		if _, err := dd(ctx, path, size, conv); err != nil {
			return f, err
		}
		conv = "conv=notrunc,fdatasync"
	}
	var err error
	if f.dd, err = dd(ctx, path, size, conv); err != nil {
		return f, err
	}
	if f.crc, err = crcFloor(size); err != nil {
		return f, err
	}
	return f, nil
}

// dd writes size bytes (whole MiB) of /dev/zero to path with bs=1M and
// conv, and returns its user + system CPU.
func dd(ctx context.Context, path string, size int64, conv string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, "dd", "if=/dev/zero", "of="+path, "bs=1M",
		fmt.Sprintf("count=%d", size>>20), "status=none", conv)
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("disk floor: dd %s: %w: %s", conv, err, out)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, errors.New("disk floor: no rusage for dd")
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// crcBufferBytes is the CRC floor's buffer, reused pass after pass: larger
// than any cache, so that each pass reads memory, as the log's CRC of
// stream bytes that arrived a while ago does.
const crcBufferBytes = 64 << 20

// castagnoli is the CRC-32C table, the stream log's checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcSink keeps the CRC floor's result, so that the computation is not
// dropped.
var crcSink atomic.Uint32

// crcFloor computes the CRC-32C of size bytes in process (crcCPU over a
// buffer of crcBufferBytes) and returns the CPU of the computation alone.
func crcFloor(size int64) (time.Duration, error) {
	return crcCPU(size, crcBufferBytes)
}

// crcCPU computes the CRC-32C of size bytes, passing over a buffer of at
// most bufBytes (crcPattern) as many times as it takes, and returns the
// thread's CPU (getrusage RUSAGE_THREAD, the goroutine locked to it) for
// the computation alone; the result goes to crcSink.
func crcCPU(size int64, bufBytes int) (time.Duration, error) {
	buf := crcPattern(int(min(size, int64(bufBytes))))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, err := threadCPU()
	if err != nil {
		return 0, err
	}
	var sum uint32
	for left := size; left > 0; {
		k := min(left, int64(len(buf)))
		sum = crc32.Update(sum, castagnoli, buf[:k])
		left -= k
	}
	c1, err := threadCPU()
	if err != nil {
		return 0, err
	}
	crcSink.Store(sum)
	return c1 - c0, nil
}

// crcPattern is the CRC floor's buffer of n bytes, every one written:
// memory never written would read as the kernel's one zero page, always in
// cache.
func crcPattern(n int) []byte {
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = byte(i*131 + i>>9 + 7)
	}
	return buf
}
