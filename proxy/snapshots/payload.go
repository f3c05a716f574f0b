package snapshots

import (
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/replbuf"
)

// The Keeper is where the main link's syncs deliver their snapshots: its
// full sync's payload (PayloadStarted, PayloadFailed, here) and the seed
// from the snapshot source (Seed, source.go).
var _ upstream.Snapshots = (*Keeper)(nil)

// A sync payload as it arrives from the primary: the main link's full sync,
// or a snapshot fetched over a side link. One rule for both (sinkFor):
//
//   - Counted: from its header on, the payload is the history's arriving
//     snapshot (or the fetch's), in mem_snapshots and so in used_memory and
//     what maxmemory judges, until it is installed or fails.
//   - To dir as it arrives: with the stream log on, once the payload passes
//     payloadMemoryMax; with maxmemory-policy evict-snapshots, once it would
//     take memory past maxmemory (the room left when its header arrived).
//     From then on the link writes every byte to a new snapshot file in dir
//     as it reads it (a snapfile.Sink, as a spill's; the bytes already held
//     are written first) and memory keeps only a window of payloadWindow
//     bytes (replbuf.Snapshot.Window): the proxy's memory does not grow with
//     the RDB, as a Redis replica with repl-diskless-load disabled writes
//     the payload to a file. Once the last byte arrived and the CRC64
//     checked (invariant 7), the file is fsynced and renamed into place,
//     with its metadata when the stream log is on, and the history makes it
//     the snapshot on disk, served with sendfile; nothing is served from it
//     before. A payload sent to dir by maxmemory counts as an evicted
//     snapshot, as a spill does. A smaller payload stays in memory; with the
//     stream log on, Persist writes it to dir once whole.
//   - Refused: a declared size larger than dir's free space (statfs), for a
//     payload that would go to dir, is refused before any of it is read;
//     the link fails, logs why and retries with backoff (a fetch, while a
//     replica waits for it). An EOF-marked payload (size unknown) that
//     outgrows the disk fails at the write that finds it full: the
//     temporary file is removed, the sync fails, is logged and retried,
//     and nothing of it is served.
//   - A dir that cannot take the file (read-only, missing) does not stop
//     replication: the payload stays in memory, with a warning.
//   - Refused too: a payload that stays in memory whole (the stream log
//     off, and no maxmemory-policy evict-snapshots) and cannot fit there:
//     larger than the machine's memory (Options.MachineMemory). A declared
//     size larger than that is refused before any of it is read, as dir's
//     free space refuses one above; an EOF-marked payload, once it grows
//     past it (memoryBound). A hostile primary on a compressed link, whose
//     chunks of zeros decompress 1,700 times larger, cannot make the proxy
//     hold more than that either. maxmemory is not that bound: where it
//     binds a payload (evict-snapshots) the payload goes to dir past it,
//     bounded by dir's free space; under noeviction the proxy holds what
//     its primary sends over maxmemory and says so (mem_over_maxmemory), as
//     a Redis replica loads its primary's RDB whatever its maxmemory
//     (replica-ignore-maxmemory): refusing it would stop replication
//     instead.
//
// Nobody reads a payload that may go to dir while it arrives, so nothing
// pins what the window lets go. On the main link replicas wait for the
// install. A fetch whose payload may go to dir (a declared size that does
// not fit under the limit, or any EOF-marked one) is not followed: its
// waiters pin the stream after it at +FULLRESYNC (invariant 7: the bytes
// after the snapshot stay in memory, or in the stream log, for them), send
// keepalive newlines, which renew a replica's repl-timeout as a primary's
// do during its BGSAVE, and get the file with sendfile once it is whole and
// checked, as any snapshot on disk (or the snapshot from memory, when it
// stayed there). Following a windowed payload would need every follower's
// cursor to pin the blocks it has not sent, which brings memory back to the
// slowest follower's lag; serving from the file keeps memory at the window
// whatever the followers do, for the price of no streaming while it
// arrives, as with a disk-based sync. Every waiter still shares the one
// fetch (one fork on the primary). Without the log and under maxmemory, or
// with a declared size within the limit, a fetch is followed in memory as
// it arrives.

const (
	// payloadMemoryMax is the most of a payload memory holds, with the
	// stream log on, before the payload goes to dir as it arrives.
	payloadMemoryMax = 1 << 20
	// payloadWindow is what memory keeps of a payload that goes to dir as
	// it arrives: a few blocks, whatever the RDB's size.
	payloadWindow = 4 * replbuf.BlockSize
)

// ErrPayloadTooLarge refuses a payload whose declared size dir cannot hold.
var ErrPayloadTooLarge = errors.New("full sync payload larger than the free space of dir")

// ErrPayloadOverMemory refuses a payload held in memory whole that memory
// cannot hold.
var ErrPayloadOverMemory = errors.New("full sync payload larger than memory may hold")

// PayloadStarted records sn, the main link's full sync payload, as the
// arriving one and returns where it goes as it arrives (nil: memory only;
// see the top of the file). Called by the upstream link, on its goroutine.
func (k *Keeper) PayloadStarted(sn *replbuf.Snapshot, size int64) (upstream.PayloadSink, error) {
	k.memoryGrows()
	f, sink, err := k.sinkFor(sn, size, "main")
	if err != nil {
		return nil, err
	}
	if f == nil {
		k.hist.PayloadArriving(sn, nil)
	} else {
		k.hist.PayloadArriving(sn, f)
	}
	return sink, nil
}

// PayloadFailed ends sn, the main link's payload, which failed.
func (k *Keeper) PayloadFailed(sn *replbuf.Snapshot) { k.hist.PayloadEnded(sn) }

// sinkFor is the one rule, for a main link's payload and a fetched one
// alike, of where a payload of the declared size (-1: EOF-marked) goes as
// it arrives: the file it would go to (nil: it stays in memory), and the
// sink the link writes it through (the file; for a payload memory holds
// whole, the bound of what memory may hold; nil for none). It refuses,
// before anything is read, a declared size dir cannot hold
// (ErrPayloadTooLarge) or memory cannot (ErrPayloadOverMemory). link names
// the link in logs.
func (k *Keeper) sinkFor(sn *replbuf.Snapshot, size int64, link string) (*payloadFile, upstream.PayloadSink, error) {
	set := k.settings()
	limit, evict := int64(-1), false // the most memory holds; -1: no limit
	if k.durable {
		limit = payloadMemoryMax
	}
	if set.MaxMemory > 0 && set.EvictSnapshots {
		if room := max(set.MaxMemory-k.host.CountedMemory(), 0); limit < 0 || room < limit {
			limit, evict = room, true
		}
	}
	if limit < 0 {
		bound, err := memoryBoundFor(k.machine(), size)
		if bound == nil || err != nil {
			return nil, nil, err // no typed nil in the interface
		}
		return nil, bound, nil
	}
	if size >= 0 && size <= limit {
		return nil, nil, nil // never past the limit: memory holds it
	}
	if size > limit {
		free, err := snapfile.FreeSpace(set.Dir)
		if err == nil && size > free {
			return nil, nil, fmt.Errorf("%w: %d bytes declared, %d free in %s", ErrPayloadTooLarge, size, free, set.Dir)
		}
	}
	f := &payloadFile{dir: set.Dir, random: k.random, withMeta: k.durable, sn: sn, limit: limit,
		evict: evict, log: k.log.With("link", link)}
	return f, f, nil
}

// memoryBoundFor is the rule for a payload memory holds whole, given the
// machine's memory: a declared size (size >= 0) larger than it is refused;
// an EOF-marked payload gets a sink that refuses it once it grows past it.
// Neither, when the machine's memory is not known (0).
func memoryBoundFor(machine, size int64) (*memoryBound, error) {
	switch {
	case machine <= 0:
		return nil, nil
	case size > machine:
		return nil, fmt.Errorf("%w: %d bytes declared, the machine's memory %d", ErrPayloadOverMemory, size, machine)
	case size >= 0:
		return nil, nil // read through a reader that stops at size
	}
	return &memoryBound{limit: machine}, nil
}

// A memoryBound is the PayloadSink of an EOF-marked payload memory holds
// whole: it keeps nothing and fails the payload once more than limit bytes
// arrived. Owned by the link's goroutine.
type memoryBound struct {
	limit int64
	n     int64 // the payload's bytes so far
}

func (b *memoryBound) Write(p []byte) error {
	if b.n += int64(len(p)); b.n > b.limit {
		return fmt.Errorf("%w: more than the machine's memory %d", ErrPayloadOverMemory, b.limit)
	}
	return nil
}
func (b *memoryBound) Commit() error { return nil }
func (b *memoryBound) Abort()        {}

// payloadFile is the PayloadSink of a payload that goes to dir once it
// passes limit bytes. It is owned by the upstream link's goroutine, which
// calls Write, Commit or Abort; the history reads Spilled and Evicted after.
type payloadFile struct {
	dir      string
	random   io.Reader // names the temporary file (nil: crypto/rand)
	withMeta bool      // write the metadata a restart adopts (stream log on)
	sn       *replbuf.Snapshot
	limit    int64 // the most memory holds of it
	evict    bool  // limit is maxmemory's: going to dir is an eviction
	log      hclog.Logger

	w     *snapfile.Sink // the file, once the payload went to dir
	stuck bool           // the file could not be created: memory only
	file  *snapfile.File // the file as committed; nil before
}

var _ history.Payload = (*payloadFile)(nil)

// Write takes p, the payload's newest bytes, already in sn: once the payload
// passes limit it goes to dir, the bytes held so far first.
func (p *payloadFile) Write(b []byte) error {
	if p.w != nil {
		_, err := p.w.Write(b)
		return err
	}
	if p.stuck || p.sn.Size() <= p.limit {
		return nil
	}
	w, err := snapfile.Create(p.dir, p.sn.ReplID(), p.sn.Offset(), p.sn.Created(), snapfile.Options{Random: p.random, WithMeta: p.withMeta})
	if err != nil {
		p.stuck = true
		p.log.Warn("full sync payload kept in memory: cannot write it to dir", "dir", p.dir, "error", err)
		return nil
	}
	if err := p.writeHeld(w); err != nil {
		w.Cancel()
		return err
	}
	p.sn.Window(payloadWindow)
	p.w = w
	p.log.Info("full sync payload going to dir as it arrives", "dir", p.dir, "received-bytes", p.sn.Size(), "maxmemory-eviction", p.evict)
	return nil
}

// writeHeld writes every byte sn holds so far, all in memory (it is not yet
// windowed), to w: those a reader can see, then the last ones, which the
// snapshot holds back from readers until it is complete (Held).
func (p *payloadFile) writeHeld(w *snapfile.Sink) error {
	rd, err := p.sn.NewReader()
	if err != nil {
		return err
	}
	defer rd.Close()
	held := p.sn.Held()
	for left := p.sn.Size() - int64(len(held)); left > 0; {
		bufs, err := rd.Pending()
		if err != nil {
			return err
		}
		n := int64(0)
		for _, b := range *bufs {
			b = b[:min(int64(len(b)), left-n)]
			if _, err := w.Write(b); err != nil {
				return err
			}
			if n += int64(len(b)); n == left {
				break
			}
		}
		if n == 0 {
			return errors.New("snapshot bytes held but not readable") // a broken invariant: published is held
		}
		if err := rd.Advance(n); err != nil {
			return err
		}
		left -= n
	}
	_, err = w.Write(held)
	return err
}

func (p *payloadFile) Commit() error {
	if p.w == nil {
		return nil // held in memory
	}
	file, err := p.w.Close()
	if err != nil {
		return err
	}
	p.file = file
	return nil
}

func (p *payloadFile) Abort() {
	if p.w != nil {
		p.w.Cancel()
	}
}

// Spilled is history.Payload's: the record of the committed file, or nil
// for a payload held in memory.
func (p *payloadFile) Spilled() *snapfile.File { return p.file }

// Evicted is history.Payload's: maxmemory sent the payload to dir.
func (p *payloadFile) Evicted() bool { return p.evict }
