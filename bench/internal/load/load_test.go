package load

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strconv"
	"testing"

	"github.com/tidwall/resp"
)

func TestBatch(t *testing.T) {
	w := Writer{ValueSize: 5, Pipeline: 3, Keys: 2}
	got := string(w.Batch(1))
	want := "*3\r\n$3\r\nSET\r\n$9\r\nbench:1:0\r\n$5\r\nxxxxx\r\n" +
		"*3\r\n$3\r\nSET\r\n$9\r\nbench:1:1\r\n$5\r\nxxxxx\r\n" +
		"*3\r\n$3\r\nSET\r\n$9\r\nbench:1:0\r\n$5\r\nxxxxx\r\n"
	if got != want {
		t.Errorf("Batch = %q\nwant    %q", got, want)
	}
}

func TestBatchValueSizes(t *testing.T) {
	w := Writer{ValueSizes: []int{1, 2, 3}, Pipeline: 2, Keys: 1}
	want := "*3\r\n$3\r\nSET\r\n$9\r\nbench:1:0\r\n$3\r\nxxx\r\n" +
		"*3\r\n$3\r\nSET\r\n$9\r\nbench:1:0\r\n$1\r\nx\r\n"
	if got := string(w.Batch(1)); got != want {
		t.Errorf("Batch = %q\nwant    %q", got, want)
	}
}

// fakePrimary answers every command with reply and counts commands.
func fakePrimary(t *testing.T, reply string) (addr string, cmds chan int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	cmds = make(chan int, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := resp.NewReader(bufio.NewReader(c))
				n := 0
				defer func() { cmds <- n }()
				for {
					if _, _, err := r.ReadValue(); err != nil {
						return
					}
					n++
					if _, err := c.Write([]byte(reply)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String(), cmds
}

func TestRun(t *testing.T) {
	addr, cmds := fakePrimary(t, "+OK\r\n")
	w := Writer{Addr: addr, ValueSize: 100, Pipeline: 4, Conns: 2}
	batch := int64(len(w.Batch(0)))
	n, err := w.Run(context.Background(), 10*batch)
	if err != nil {
		t.Fatal(err)
	}
	if n < 10*batch || n%batch != 0 {
		t.Errorf("wrote %d bytes, want whole batches of %d, at least 10", n, batch)
	}
	total := <-cmds + <-cmds
	if int64(total)*batch/4 != n {
		t.Errorf("primary saw %d SETs for %d bytes", total, n)
	}
}

func TestRunErrorReply(t *testing.T) {
	addr, _ := fakePrimary(t, "-OOM no\r\n")
	_, err := Writer{Addr: addr, ValueSize: 1, Pipeline: 1, Conns: 1}.Run(context.Background(), 1000)
	if !errors.Is(err, ErrReply) {
		t.Errorf("err = %v, want ErrReply", err)
	}
}

func TestRunCancel(t *testing.T) {
	addr, _ := fakePrimary(t, "+OK\r\n")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := Writer{Addr: addr, ValueSize: 10}.Run(ctx, 0)
		done <- err
	}()
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
}

// counting appends SET c:<i> <i> for i = 0, 1, ...: every command distinct.
func counting() func([]byte) []byte {
	i := 0
	return func(dst []byte) []byte {
		s := strconv.Itoa(i)
		i++
		dst = append(dst, "*3\r\n$3\r\nSET\r\n"...)
		dst = appendBulk(dst, []byte("c:"+s))
		return appendBulk(dst, []byte(s))
	}
}

func TestCommandsRun(t *testing.T) {
	addr, cmds := fakePrimary(t, ":1\r\n")
	n, err := Commands{Addr: addr, Batch: 5, Next: counting()}.Run(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if n < 1000 {
		t.Errorf("wrote %d bytes, want at least 1000", n)
	}
	var want int64
	next := counting()
	seen := <-cmds
	for range seen {
		want += int64(len(next(nil)))
	}
	if seen%5 != 0 || want != n {
		t.Errorf("primary saw %d commands (%d bytes) for %d bytes written, want whole batches of 5", seen, want, n)
	}
}

func TestCommandsErrorReply(t *testing.T) {
	addr, _ := fakePrimary(t, "-OOM no\r\n")
	_, err := Commands{Addr: addr, Batch: 1, Next: counting()}.Run(context.Background(), 1<<20)
	if !errors.Is(err, ErrReply) {
		t.Errorf("err = %v, want ErrReply", err)
	}
}
