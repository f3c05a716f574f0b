package replbuf

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// writeLoop is a replica's writer: send what is pending, wait for more, until
// the stream ends.
func writeLoop(ctx context.Context, c *Cursor, w io.Writer) error {
	defer c.Close()
	for {
		n, err := c.Send(w)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if n == 0 {
			if err := c.Wait(ctx); err != nil {
				return err
			}
		}
	}
}

// TestFanoutOverTCP: one producer reading from a socket-like source, 16
// cursors each draining a real loopback TCP connection with writev; every
// receiver gets exactly the produced bytes. Run under -race.
func TestFanoutOverTCP(t *testing.T) {
	const replicas = 16
	total := 24 << 20
	if testing.Short() {
		total = 4 << 20
	}
	data := make([]byte, total)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	want := sha256.Sum256(data)

	s := NewStream(500, &Config{BacklogSize: 256 << 10, MaxBatchBytes: 256 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, 2*replicas)
	sums := make([][32]byte, replicas)
	for i := range replicas {
		send, recv := redistest.TCPPair(t)
		// Some replicas join late, from the backlog.
		c, err := s.Attach(501)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer send.CloseWrite()
			if err := writeLoop(ctx, c, send); err != nil {
				errs <- err
			}
		}()
		go func() {
			defer wg.Done()
			h := sha256.New()
			n, err := io.Copy(h, recv)
			if err != nil {
				errs <- err
			}
			if n != int64(total) {
				errs <- errors.New("receiver got a different byte count")
			}
			copy(sums[i][:], h.Sum(nil))
		}()
	}
	// The producer: reads of random sizes, like a socket.
	r := &chunkReader{data: data}
	for range total / 1000 {
		r.sizes = append(r.sizes, 1+rng.IntN(40000))
	}
	if _, err := s.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	s.Close(nil)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, sum := range sums {
		if sum != want {
			t.Errorf("replica %d received different bytes", i)
		}
	}
	if u := s.Usage(); u.Cursors != 0 || u.Total > 256<<10+3*BlockFootprint {
		t.Errorf("after all replicas finished: %+v", u)
	}
}

// TestPublicationWithoutSockets checks the publication rule where the race
// detector can see it: the kernel's reads during writev are invisible to it,
// so here readers copy the bytes out of the blocks with plain memory reads
// while the producer writes the following bytes into the same blocks.
func TestPublicationWithoutSockets(t *testing.T) {
	const readers = 8
	total := 8 << 20
	if testing.Short() {
		total = 2 << 20
	}
	pool := NewPool(8)
	pool.poison = true
	s := NewStream(0, &Config{BacklogSize: 64 << 10, MaxBatchBytes: 100 << 10, Pool: pool})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	results := make([][]byte, readers)
	errs := make(chan error, readers)
	for i := range readers {
		c, err := s.Attach(1)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			var out []byte
			for {
				bufs, err := c.Pending()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					errs <- err
					return
				}
				if len(*bufs) == 0 {
					if err := c.Wait(ctx); err != nil {
						errs <- err
						return
					}
					continue
				}
				// Copy a random prefix of the batch: a partial write.
				want := buffersLen(*bufs)
				if rng.IntN(2) == 0 {
					want = rng.IntN(want + 1)
				}
				n := 0
				for _, b := range *bufs {
					k := min(len(b), want-n)
					out = append(out, b[:k]...)
					n += k
				}
				if err := c.Advance(int64(n)); err != nil {
					errs <- err
					return
				}
			}
			results[i] = out
		}()
	}
	src := pattern(1, total)
	for p := src; len(p) > 0; {
		k := min(1+int(p[0])*37, len(p))
		if err := s.Append(p[:k]); err != nil {
			t.Fatal(err)
		}
		p = p[k:]
	}
	s.Close(nil)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, got := range results {
		if !bytes.Equal(got, src) {
			t.Fatalf("reader %d: %d bytes, want %d, or different content", i, len(got), len(src))
		}
	}
}
