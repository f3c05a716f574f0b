package proxy

import (
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/eviction"
	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/replbuf"
)

// A sync payload as it arrives from the primary: the main link's full sync,
// or a snapshot fetched over a side link (fetch.go). One rule for both
// (payloadSink):
//
//   - Counted: from its header on, the payload is the history's arriving
//     snapshot (or the fetch's), in mem_snapshots and so in used_memory and what maxmemory
//     judges, until it is installed or fails.
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
//     with its metadata when the stream log is on, and install makes it the
//     snapshot on disk, served with sendfile; nothing is served from it
//     before (for a fetch, fetchEnded does what install does). A payload sent to disk by maxmemory counts as an evicted
//     snapshot, as a spill does. A smaller payload stays in memory, as
//     before: with the stream log on, the monitor writes it to dir once
//     whole (persistNewest).
//   - Refused: a declared size larger than dir's free space (statfs), for a
//     payload that would go to dir, is refused before any of it is read;
//     the link fails, logs why and retries with backoff (a fetch, while a
//     replica waits for it). An EOF-marked
//     payload (size unknown) that outgrows the disk fails at the write that
//     finds it full: the temporary file is removed, the sync fails, is
//     logged and retried, and nothing of it is served.
//   - A dir that cannot take the file (read-only, missing) does not stop
//     replication: the payload stays in memory, as before, with a warning.
//   - Refused too: a payload that stays in memory whole (the stream log
//     off, and no maxmemory-policy evict-snapshots) and cannot fit there:
//     larger than the machine's memory (MemTotal, or the cgroup's limit
//     when lower: machineMemory). A declared size larger than that is
//     refused before any of it is read, as dir's free space refuses one
//     above; an EOF-marked payload, once it grows past it (an
//     upstream.LimitSink). A hostile primary on a compressed link, whose
//     chunks of zeros decompress 1,700 times larger, cannot make the proxy
//     hold more than that either. maxmemory is not that bound: where it
//     binds a payload (evict-snapshots) the payload goes to dir past it,
//     bounded by dir's free space; under noeviction the proxy holds what
//     its primary sends over maxmemory and says so (mem_over_maxmemory), as
//     a Redis replica loads its primary's RDB whatever its maxmemory
//     (replica-ignore-maxmemory): refusing it would stop replication
//     instead.
//
// Nobody reads the payload while it arrives, so nothing pins what the
// window lets go: replicas wait for install on the main link. A fetch's
// waiters used to follow it in memory from its first byte (an EOF-marked
// payload to replicas with capa eof); a payload that may go to dir (one
// whose declared size does not fit under the limit, or any EOF-marked one)
// is no longer followed: its waiters pin the stream after it at
// +FULLRESYNC (invariant 7: the bytes after the snapshot stay in memory, or
// in the stream log, for them), send keepalive newlines, which renew a
// replica's repl-timeout as a primary's do during its BGSAVE, and get the
// file with sendfile once it is whole and checked, as any snapshot on disk
// (or the snapshot from memory, when it stayed there). Following a windowed
// payload would need every follower's cursor to pin the blocks it has not
// sent, which brings memory back to the slowest follower's lag; serving
// from the file keeps memory at the window whatever the followers do, for
// the price of no streaming while it arrives, as with a disk-based sync.
// Every waiter still shares the one fetch (one fork on the primary), and
// the stream after the snapshot may come from the stream log (planFull).
// Without the log and under maxmemory, or with a declared size within the
// limit, a fetch is followed in memory as it arrives, as before.

const (
	// payloadMemoryMax is the most of a payload memory holds, with the
	// stream log on, before the payload goes to dir as it arrives.
	payloadMemoryMax = 1 << 20
	// payloadWindow is what memory keeps of a payload that goes to dir as
	// it arrives: a few blocks, whatever the RDB's size.
	payloadWindow = 4 * replbuf.BlockSize
)

// errPayloadTooLarge refuses a payload whose declared size dir cannot hold.
var errPayloadTooLarge = errors.New("full sync payload larger than the free space of dir")

// errPayloadOverMemory refuses a payload held in memory whole that memory
// cannot hold.
var errPayloadOverMemory = errors.New("full sync payload larger than memory may hold")

// payloadStarted is upstream.Host.PayloadStarted: it records sn as the
// arriving payload and decides when it goes to dir (see the top of the
// file). From the upstream link's goroutine, no lock held.
func (s *Server) payloadStarted(sn *replbuf.Snapshot, size int64) (upstream.PayloadSink, error) {
	f, sink, err := s.payloadSink(sn, size, "main")
	if err != nil {
		return nil, err
	}
	if f == nil {
		s.hist.PayloadArriving(sn, nil)
	} else {
		s.hist.PayloadArriving(sn, f)
	}
	return sink, nil
}

// payloadSink is the one rule, for a main link's payload and a fetched one
// alike, of where a payload of the declared size (-1: EOF-marked) goes as
// it arrives: the file it would go to (nil: it stays in memory), and the
// sink the link writes it through (the file; for a payload memory holds
// whole, the bound of what memory may hold; nil for none). It refuses,
// before anything is read, a declared size dir cannot hold
// (errPayloadTooLarge) or memory cannot (errPayloadOverMemory). link names
// the link in logs. No lock held.
func (s *Server) payloadSink(sn *replbuf.Snapshot, size int64, link string) (*payloadFile, upstream.PayloadSink, error) {
	cfg := s.config()
	limit, evict := int64(-1), false // the most memory holds; -1: no limit
	if s.durable != nil {
		limit = payloadMemoryMax
	}
	if cfg.MaxMemory > 0 && cfg.MaxMemoryPolicy == eviction.EvictSnapshots {
		if room := max(cfg.MaxMemory-s.memoryReport().Counted, 0); limit < 0 || room < limit {
			limit, evict = room, true
		}
	}
	if limit < 0 {
		bound, err := payloadMemoryBound(s.machineMemory(), size)
		if bound == nil || err != nil {
			return nil, nil, err // no typed nil in the interface
		}
		return nil, bound, nil
	}
	if size >= 0 && size <= limit {
		return nil, nil, nil // never past the limit: memory holds it
	}
	if size > limit {
		free, err := snapfile.FreeSpace(cfg.Dir)
		if err == nil && size > free {
			return nil, nil, fmt.Errorf("%w: %d bytes declared, %d free in %s", errPayloadTooLarge, size, free, cfg.Dir)
		}
	}
	f := &payloadFile{dir: cfg.Dir, random: s.spillRand, withMeta: s.durable != nil, sn: sn, limit: limit,
		evict: evict, log: s.log.With("link", link)}
	return f, f, nil
}

// payloadMemoryBound is the rule for a payload memory holds whole, given
// the machine's memory: a declared size (size >= 0) larger than it is
// refused; an EOF-marked payload gets a sink that refuses it once it grows
// past it. Neither, when the machine's memory is not known (0).
func payloadMemoryBound(machine, size int64) (*upstream.LimitSink, error) {
	switch {
	case machine <= 0:
		return nil, nil
	case size > machine:
		return nil, fmt.Errorf("%w: %d bytes declared, the machine's memory %d", errPayloadOverMemory, size, machine)
	case size >= 0:
		return nil, nil // read through a reader that stops at size
	}
	return &upstream.LimitSink{Limit: machine, Err: fmt.Errorf("%w: more than the machine's memory %d", errPayloadOverMemory, machine)}, nil
}

// payloadFile is the upstream.PayloadSink of a payload that goes to dir once
// it passes limit bytes. It is owned by the upstream link's goroutine, which
// calls Write, Commit or Abort, and then Install (install reads it under
// h.mu).
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
// windowed), to w.
func (p *payloadFile) writeHeld(w *snapfile.Sink) error {
	rd, err := p.sn.NewReader()
	if err != nil {
		return err
	}
	defer rd.Close()
	for left := p.sn.Size(); left > 0; {
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
	return nil
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
