package replbuf

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

func TestCRC64CheckValue(t *testing.T) {
	// The check value of CRC-64/Jones as Redis computes it (PROTOCOL §6).
	if got := CRC64(0, []byte("123456789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("crc64(123456789) = %016x", got)
	}
	// Incremental updates agree with one pass.
	if got := CRC64(CRC64(0, []byte("1234")), []byte("56789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("incremental crc64 = %016x", got)
	}
}

// rdbLike returns n bytes followed by their CRC64 trailer.
func rdbLike(n int) []byte {
	p := pattern(1, n)
	return binary.LittleEndian.AppendUint64(p, CRC64(0, p))
}

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

func TestSnapshotChecksum(t *testing.T) {
	sizes := []int{0, 1, 7, 8, 100, BlockSize - 8, BlockSize - 4, BlockSize, BlockSize + 3, 3*BlockSize + 11}
	for _, n := range sizes {
		good := rdbLike(n)
		t.Run("good", func(t *testing.T) {
			sn := NewSnapshot("id", 0, nil, time.Now())
			feed(t, sn, good, 5000)
			if err := sn.Complete(); err != nil {
				t.Fatalf("%d bytes: %v", n, err)
			}
		})
		t.Run("corrupt", func(t *testing.T) {
			bad := append([]byte(nil), good...)
			bad[len(bad)/2] ^= 1
			sn := NewSnapshot("id", 0, nil, time.Now())
			feed(t, sn, bad, 5000)
			if err := sn.Complete(); !errors.Is(err, ErrChecksum) || sn.State() != SnapshotFailed {
				t.Fatalf("%d bytes corrupted: %v, state %v", n, err, sn.State())
			}
		})
		t.Run("zero trailer", func(t *testing.T) {
			zero := append(pattern(1, n), make([]byte, 8)...)
			sn := NewSnapshot("id", 0, nil, time.Now())
			feed(t, sn, zero, 5000)
			if err := sn.Complete(); err != nil {
				t.Fatalf("checksum disabled: %v", err)
			}
		})
	}
	sn := NewSnapshot("id", 0, nil, time.Now())
	sn.Append([]byte("short"))
	if err := sn.Complete(); !errors.Is(err, ErrChecksum) {
		t.Fatalf("5-byte RDB: %v", err)
	}
}

func feed(t testing.TB, sn *Snapshot, p []byte, chunk int) {
	t.Helper()
	r := &recordingReader{}
	for len(p) > 0 {
		k := min(chunk, len(p))
		r.chunks = append(r.chunks, p[:k])
		p = p[k:]
	}
	for {
		_, err := sn.ReadOnce(r)
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
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
	sn.Append(rdbLike(10 * BlockSize))
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
	for _, n := range []int{0, 100, BlockSize, 3*BlockSize + 5, 200*BlockSize + 11} {
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
				for p := rdb; len(p) > 0; {
					if !sn.Windowed() && len(rdb)-len(p) >= late {
						sn.Window(window)
						peak = 0
					}
					k := min(5000, len(p))
					if byAppend {
						if err := sn.Append(p[:k]); err != nil {
							t.Fatal(err)
						}
					} else {
						feed(t, sn, p[:k], k)
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
				err := sn.Complete()
				if bad != (err != nil) || bad && !errors.Is(err, ErrChecksum) {
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
