package replbuf

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/rdbcheck"
)

// rdbLike returns a valid RDB of n bytes (24 or more): one string key.
func rdbLike(n int) []byte { return redistest.RDBOfSize(n, 1) }

func TestSnapshotRealRDB(t *testing.T) {
	rdb, err := os.ReadFile("../testdata/rdb/small.rdb") // saved by redis-cli --rdb from Redis 7.0
	if err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []int{1, 7, 100, len(rdb)} {
		sn := NewSnapshot("8c2d5f0e4b1a79d3c6e2f1a0b9d8c7e6f5a4b3c2", 42, nil, time.Now())
		for p := rdb; len(p) > 0; {
			k := min(chunk, len(p))
			if err := sn.Append(p[:k]); err != nil {
				t.Fatal(err)
			}
			p = p[k:]
		}
		if err := sn.Complete(); err != nil {
			t.Fatalf("chunks of %d: %v", chunk, err)
		}
		if sn.Size() != int64(len(rdb)) || sn.State() != SnapshotComplete {
			t.Fatalf("size %d state %v", sn.Size(), sn.State())
		}
	}
}

// rdbSizes are RDB sizes around the block boundaries, from the smallest
// with one key.
var rdbSizes = []int{24, 30, 100, BlockSize - 8, BlockSize - 4, BlockSize, BlockSize + 3, 3*BlockSize + 11}

// TestSnapshotChecksum: the walk's verdict on the trailer is the
// snapshot's: a good CRC64 completes, a wrong one fails with
// rdbcheck.ErrChecksum, a zero one (checksum disabled) completes; a
// payload cut before its end fails.
func TestSnapshotChecksum(t *testing.T) {
	for _, n := range rdbSizes {
		good := rdbLike(n)
		t.Run("good", func(t *testing.T) {
			sn := NewSnapshot("id", 0, nil, time.Now())
			fill(t, sn, good, 5000)
			if err := sn.Complete(); err != nil {
				t.Fatalf("%d bytes: %v", n, err)
			}
		})
		t.Run("corrupt", func(t *testing.T) {
			bad := append([]byte(nil), good...)
			bad[len(bad)-1] ^= 1
			sn := NewSnapshot("id", 0, nil, time.Now())
			// The walk refuses the trailer as it arrives; Complete then
			// has nothing to complete.
			err := feed(sn, bad, 5000)
			if cerr := sn.Complete(); err == nil {
				err = cerr
			}
			if !errors.Is(err, ErrRefused) || !errors.Is(err, rdbcheck.ErrChecksum) || sn.State() != SnapshotFailed {
				t.Fatalf("%d bytes, trailer corrupted: %v, state %v", n, err, sn.State())
			}
		})
		t.Run("zero trailer", func(t *testing.T) {
			zero := append(good[:len(good)-8:len(good)-8], make([]byte, 8)...)
			sn := NewSnapshot("id", 0, nil, time.Now())
			fill(t, sn, zero, 5000)
			if err := sn.Complete(); err != nil {
				t.Fatalf("checksum disabled: %v", err)
			}
		})
	}
	sn := NewSnapshot("id", 0, nil, time.Now())
	sn.Append(rdbLike(100)[:50])
	if err := sn.Complete(); !errors.Is(err, ErrRefused) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("an RDB cut half way: %v", err)
	}
}

// feed reads p into sn with ReadOnce, chunk bytes at a time, and returns
// the first error but io.EOF: the walk's, when it refuses a byte.
func feed(sn *Snapshot, p []byte, chunk int) error {
	r := &recordingReader{}
	for len(p) > 0 {
		k := min(chunk, len(p))
		r.chunks = append(r.chunks, p[:k])
		p = p[k:]
	}
	for {
		_, err := sn.ReadOnce(r)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// fill is feed that fails the test on an error.
func fill(t testing.TB, sn *Snapshot, p []byte, chunk int) {
	t.Helper()
	if err := feed(sn, p, chunk); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotFollowWhileBuilding: a reader follows the bytes as they arrive,
// sees io.EOF after the last byte of a complete snapshot, and an error when it
// fails instead.
func TestSnapshotFollowWhileBuilding(t *testing.T) {
	payload := rdbLike(5*BlockSize + 123)
	sn := NewSnapshot("id", 7, nil, time.Now())
	r, err := sn.NewReader()
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for p := payload; len(p) > 0; {
		k := min(3000, len(p))
		sn.Append(p[:k])
		p = p[k:]
		got = append(got, drain(t, r)...)
		// The RDB's end opcode and checksum: never seen before Complete.
		if held := len(payload) - len(p) - len(got); held < 9 {
			t.Fatalf("a reader had %d of %d bytes received: %d held back, want at least 9", len(got), len(payload)-len(p), held)
		}
	}
	if sn.State() != SnapshotBuilding {
		t.Fatal("complete before Complete")
	}
	if err := waitCtx(t, r, 10*time.Millisecond); err == nil {
		t.Fatal("reader of a building snapshot woke with nothing new")
	}
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	if err := waitCtx(t, r, time.Second); err != nil {
		t.Fatal(err)
	}
	got = append(got, drain2(t, r)...) // the end, held back until Complete
	if _, err := r.Pending(); !isEOF(err) {
		t.Fatalf("after the last byte: %v", err)
	}
	if string(got) != string(payload) {
		t.Fatal("reader got different bytes")
	}
	// A second reader, after completion, reads it all.
	r2, _ := sn.NewReader()
	if string(drain2(t, r2)) != string(payload) {
		t.Fatal("late reader got different bytes")
	}

	failing := NewSnapshot("id", 7, nil, time.Now())
	fr, _ := failing.NewReader()
	failing.Append(payload[:1000])
	cause := errors.New("upstream closed mid-RDB")
	failing.Fail(cause)
	if _, err := fr.Pending(); !errors.Is(err, cause) {
		t.Fatalf("reader of a failed snapshot: %v", err)
	}
	if _, err := failing.NewReader(); err == nil {
		t.Fatal("a failed snapshot was served again")
	}
	if err := failing.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append to a failed snapshot: %v", err)
	}
}

func TestSnapshotSharesPoolAndReleases(t *testing.T) {
	pool := NewPool(64)
	sn := NewSnapshot("id", 1, pool, time.Now())
	sn.Append(rdbLike(10*BlockSize + 100))
	sn.Complete()
	if u := sn.Usage(); u.Blocks != 11 || u.Total != 11*BlockFootprint {
		t.Fatalf("usage %+v", u)
	}
	sn.Release()
	if st := pool.Stats(); st.FreeBlocks != 11 {
		t.Fatalf("released snapshot left %d free blocks, want 11", st.FreeBlocks)
	}
	if _, err := sn.NewReader(); !errors.Is(err, ErrReleased) {
		t.Fatalf("reader of a released snapshot: %v", err)
	}
	s := NewStream(0, &Config{Pool: pool})
	appendPattern(t, s, 5*BlockSize)
	if st := pool.Stats(); st.Reused < 5 {
		t.Fatalf("stream did not reuse the snapshot's blocks: %+v", st)
	}
}

// TestSnapshotWindow: a windowed snapshot holds about its window whatever its
// size, by ReadOnce and by Append, from the start or once bytes arrived,
// still checks its CRC64 (a good trailer completes, a bad one fails), and
// has no readers.
func TestSnapshotWindow(t *testing.T) {
	const window = 4 * BlockSize
	for _, n := range []int{24, 100, BlockSize, 3*BlockSize + 5, 200*BlockSize + 11} {
		for _, bad := range []bool{false, true} {
			for _, byAppend := range []bool{false, true} {
				rdb := rdbLike(n)
				if bad {
					rdb[len(rdb)-1] ^= 1
				}
				pool := NewPool(0)
				sn := NewSnapshot("id", 0, pool, time.Now())
				late := len(rdb) / 2 // the window starts halfway in
				if byAppend {
					sn.Window(window)
				}
				peak := int64(0)
				var err error // the walk's refusal of the bad trailer, as it arrives
				for p := rdb; len(p) > 0 && err == nil; {
					if !sn.Windowed() && len(rdb)-len(p) >= late {
						sn.Window(window)
						peak = 0
					}
					k := min(5000, len(p))
					if byAppend {
						err = sn.Append(p[:k])
					} else {
						err = feed(sn, p[:k], k)
					}
					p = p[k:]
					peak = max(peak, sn.Usage().Blocks)
				}
				if !sn.Windowed() { // all in one chunk
					sn.Window(window)
				}
				if most := int64(window/BlockSize + 2); peak > most {
					t.Fatalf("%d bytes: %d blocks held at the peak, want at most %d", n, peak, most)
				}
				if cerr := sn.Complete(); err == nil {
					err = cerr
				}
				if bad != (err != nil) || bad && !errors.Is(err, rdbcheck.ErrChecksum) {
					t.Fatalf("%d bytes, bad trailer %v: Complete = %v", n, bad, err)
				}
				if _, err := sn.NewReader(); !bad && !errors.Is(err, ErrWindowed) {
					t.Fatalf("NewReader of a windowed snapshot: %v, want ErrWindowed", err)
				}
				sn.Release()
			}
		}
	}
}

// TestSnapshotRefusedWhileBuilding: bytes no RDB can hold fail the snapshot
// at the Append that brings them, before a reader sees them: a reader
// following it has only bytes before them, and then the walk's error; and
// the snapshot is never served again.
func TestSnapshotRefusedWhileBuilding(t *testing.T) {
	junk := make([]byte, 4096) // as a type byte, 0xaf is no RDB type or opcode
	for i := range junk {
		junk[i] = 0xaf
	}
	for _, n := range []int{24, BlockSize + 100, 3 * BlockSize} {
		good := rdbLike(n)
		// After the header, or after the key: where a type byte comes.
		for _, cut := range []int{9, len(good) - holdBack} {
			sn := NewSnapshot("id", 7, nil, time.Now())
			r, err := sn.NewReader()
			if err != nil {
				t.Fatal(err)
			}
			if err := sn.Append(good[:cut]); err != nil {
				t.Fatalf("%d bytes cut at %d: the good part refused: %v", n, cut, err)
			}
			got := drain(t, r)
			err = sn.Append(junk)
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("%d bytes cut at %d: junk taken: %v", n, cut, err)
			}
			var corrupt *rdbcheck.CorruptError
			if !errors.As(err, &corrupt) {
				t.Errorf("%d bytes cut at %d: %v is not a *rdbcheck.CorruptError", n, cut, err)
			}
			if sn.State() != SnapshotFailed {
				t.Fatalf("%d bytes cut at %d: state %v after junk", n, cut, sn.State())
			}
			if _, err := r.Pending(); !errors.Is(err, ErrRefused) {
				t.Fatalf("%d bytes cut at %d: the reader's next Pending: %v, want the walk's error", n, cut, err)
			}
			if len(got) > cut || string(got) != string(good[:len(got)]) {
				t.Fatalf("%d bytes cut at %d: the reader had %d bytes, not a prefix of the good ones", n, cut, len(got))
			}
			if _, err := sn.NewReader(); err == nil {
				t.Fatalf("%d bytes cut at %d: a refused snapshot served again", n, cut)
			}
			sn.Release()
		}
	}
}

// TestSnapshotHeld: what a reader can see and Held are, together, every
// byte received, whatever the sizes of the pieces; Held is empty once the
// snapshot is complete.
func TestSnapshotHeld(t *testing.T) {
	rdb := rdbLike(BlockSize + 100)
	for _, chunk := range []int{1, 2, 8, 9, 10, 4000} {
		sn := NewSnapshot("id", 0, nil, time.Now())
		r, err := sn.NewReader()
		if err != nil {
			t.Fatal(err)
		}
		var seen []byte
		for p := rdb; len(p) > 0; {
			k := min(chunk, len(p))
			if err := sn.Append(p[:k]); err != nil {
				t.Fatal(err)
			}
			p = p[k:]
			seen = append(seen, drain(t, r)...)
			if got, want := string(seen)+string(sn.Held()), string(rdb[:len(rdb)-len(p)]); got != want {
				t.Fatalf("chunks of %d, %d bytes in: readable and held make %d bytes, not those received", chunk, len(want), len(got))
			}
		}
		if err := sn.Complete(); err != nil {
			t.Fatal(err)
		}
		if h := sn.Held(); len(h) != 0 {
			t.Fatalf("chunks of %d: %d bytes held after Complete", chunk, len(h))
		}
		sn.Release()
	}
}
