package rdbcheck

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
)

// Bounds of the duplicate checks: each set's largest table has 1<<bits
// slots of 8 bytes (and 2 bytes a remembered hash to clear it) and
// remembers half as many hashes (seen).
const (
	keysBits      = 15 // keys, by DB: 16384 remembered, 256 KiB
	membersBits   = 13 // members of one value, or a stream's node keys: 4096, 64 KiB
	groupsBits    = 8  // consumer groups of one stream: 128
	consumersBits = 9  // consumers of one group: 256
	pelBits       = 12 // pending IDs of one group: 2048, 32 KiB
	ownPELBits    = 11 // pending IDs of one consumer: 1024, 16 KiB
)

// walk is the state of one RDB's walk, owned by the coroutine that runs it
// (and by Write while the coroutine is suspended). It holds nothing of the
// Walker, so that a Walker dropped without Close can be collected and its
// walk stopped.
type walk struct {
	in      input
	version int
	db      uint64 // the selected DB, for the key check
	keyed   bool   // a key has been read: the key set exists

	seed   maphash.Seed
	h      maphash.Hash
	digits [24]byte // an integer-encoded string's decimal form
	small  [32]byte // a short string read whole (scores, IDs, aux keys)

	lzf lzfReader
	src src // the string being read (open)

	// The duplicate checks' sets, allocated when first needed.
	keys, members, groups, consumers, pel, ownPEL *seen

	err   error // how the walk ended: nil once the RDB ended well
	ended bool  // the checksum was read and matched (or was zero)
}

func newWalk() *walk {
	w := &walk{seed: maphash.MakeSeed()}
	w.h.SetSeed(w.seed)
	w.in.crcOn = true
	return w
}

// seq is the walk as an iterator for iter.Pull: it runs the walk, yielding
// each time it has used up the bytes it was given.
func (w *walk) seq(yield func(struct{}) bool) {
	w.in.yield = yield
	defer func() {
		if r := recover(); r != nil {
			w.err = &CorruptError{Offset: w.in.offset(), Reason: fmt.Sprintf("internal error: %v", r), Err: errInternal}
		}
	}()
	w.err = w.run()
	w.ended = w.err == nil
}

// fail returns the CorruptError for the last byte read.
func (w *walk) fail(format string, args ...any) error {
	return w.failRule(ruleLoader, format, args...)
}

func (w *walk) failRule(r rule, format string, args ...any) error {
	return &CorruptError{Offset: max(w.in.offset()-1, 0), Reason: fmt.Sprintf(format, args...), rule: r}
}

// run walks the whole RDB, as rdbLoadRioWithLoadingCtx and redis-check-rdb
// read it.
func (w *walk) run() error {
	if err := w.header(); err != nil {
		return err
	}
	for {
		t, err := w.in.byte()
		if err != nil {
			return err
		}
		switch t {
		case opExpireTime:
			err = w.in.skip(4)
		case opExpireTimeMS:
			err = w.in.skip(8)
		case opFreq:
			err = w.in.skip(1)
		case opIdle:
			_, err = w.length()
		case opEOF:
			return w.end()
		case opSelectDB:
			w.db, err = w.length()
		case opResizeDB:
			err = w.resizeDB()
		case opAux:
			err = w.aux()
		case opModuleAux:
			err = w.moduleAux()
		case opFunctionPre:
			return w.failRule(ruleNewer, "pre-release function format not supported")
		case opFunction2:
			err = w.skipString()
		case opSlotInfo:
			if w.version < versionHashTTL {
				return w.fail("unknown RDB encoding type %d", t)
			}
			err = w.slotInfo()
		default:
			err = w.keyValue(t)
		}
		if err != nil {
			return err
		}
	}
}

// header reads "REDIS" and the version: four characters that Redis reads
// with atoi.
func (w *walk) header() error {
	for _, c := range []byte("REDIS") {
		b, err := w.in.byte()
		if err != nil {
			return err
		}
		if b != c {
			return w.fail("wrong signature trying to load DB from file")
		}
	}
	var v [4]byte
	if err := w.in.full(v[:]); err != nil {
		return err
	}
	w.version = atoi(v[:])
	if w.version < minVersion || w.version > maxVersion {
		e := w.fail("can't handle RDB format version %d", w.version).(*CorruptError)
		e.Err = ErrVersion
		return e
	}
	return nil
}

// end reads the checksum after the EOF opcode, for versions that have one.
// A trailer of zero is an RDB saved with rdbchecksum no: nothing to check.
func (w *walk) end() error {
	w.in.stopCRC()
	if w.version < versionChecksum {
		return nil
	}
	var t [8]byte
	if err := w.in.full(t[:]); err != nil {
		return err
	}
	if sum := binary.LittleEndian.Uint64(t[:]); sum != 0 && sum != w.in.crc {
		e := w.fail("RDB CRC error: the trailer is %016x, the bytes sum to %016x", sum, w.in.crc).(*CorruptError)
		e.Err = ErrChecksum
		return e
	}
	return nil
}

// resizeDB reads RESIZEDB's two hints: the DB's size and its expires'
// size. A replica sizes its tables by them; Redis's allocator maps such a
// table lazily, and a replica loads any hint (7.0.15 was tried with 2^40
// and 2^64-2), so they are not bounded.
func (w *walk) resizeDB() error {
	for range 2 {
		if _, err := w.length(); err != nil {
			return err
		}
	}
	return nil
}

// slotInfo reads Redis 7.4's SLOT_INFO: slot id, slot size, expires slot
// size. A cluster-mode replica sizes that slot's tables by them, indexing
// its array of slots with the id unchecked: an id past the last slot is
// refused.
func (w *walk) slotInfo() error {
	slot, err := w.length()
	if err != nil {
		return err
	}
	if slot >= clusterSlots {
		return w.failRule(ruleReplica, "SLOT_INFO for slot %d", slot)
	}
	for range 2 {
		if _, err := w.length(); err != nil {
			return err
		}
	}
	return nil
}

// keyValue reads one key of type t and its value.
func (w *walk) keyValue(t byte) error {
	switch {
	case t == typeModulePre:
		return w.fail("pre-release module format not supported")
	case t <= typeModule2, t >= typeHashZipmap && t <= typeStreamListpacks2:
	case t == typeSetListpack || t == typeStreamListpacks3:
		if w.version < versionSetListpack {
			return w.fail("unknown RDB encoding type %d", t)
		}
	case t >= typeHashMetadataPre && t <= typeHashListpackEx:
		if w.version < versionHashTTL {
			return w.fail("unknown RDB encoding type %d", t)
		}
	default:
		return w.fail("unknown RDB encoding type %d", t)
	}
	if err := w.key(); err != nil {
		return err
	}
	return w.value(t)
}

// key reads a key and refuses one seen before in the same DB: a replica
// panics on it ("Duplicated key found in RDB file").
func (w *walk) key() error {
	if !w.keyed {
		w.keys = newSeen(keysBits)
		w.keyed = true
	}
	sum, err := w.hashString()
	if err != nil {
		return err
	}
	sum ^= w.db * 0x9e3779b97f4a7c15 // the same key in another DB is another key
	if w.keys.add(sum) {
		return w.failRule(ruleDuplicateKey, "duplicated key found in RDB file (DB %d)", w.db)
	}
	return nil
}

// atoi is C's atoi on a few bytes that end at a NUL or at their end:
// leading white space, a sign, digits.
func atoi(b []byte) int {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	n := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		n = n*10 + int(b[i]-'0')
	}
	if neg {
		return -n
	}
	return n
}

// isSpace is C's isspace in the C locale.
func isSpace(c byte) bool {
	return c == ' ' || c >= '\t' && c <= '\r'
}
