package rdbcheck

import (
	"bytes"
	"encoding/binary"
	"math"
)

// value reads the value of a key of type t, as rdbLoadObject does.
func (w *walk) value(t byte) error {
	switch t {
	case typeString:
		return w.skipString()
	case typeList:
		return w.list()
	case typeSet:
		return w.set()
	case typeZset, typeZset2:
		return w.zset(t)
	case typeHash:
		return w.hash()
	case typeModule2:
		if _, err := w.lengthAny(); err != nil { // the module's id
			return err
		}
		return w.moduleValue()
	case typeHashMetadataPre, typeHashMetadata:
		return w.hashMetadata(t)
	case typeListQuicklist, typeListQuicklist2:
		return w.quicklist(t)
	case typeStreamListpacks, typeStreamListpacks2, typeStreamListpacks3:
		return w.stream(t)
	}
	return w.encoded(t)
}

// empty refuses an empty value: redis-check-rdb refuses it (a replica
// skips it; Redis has not written one since 6.2).
func (w *walk) empty(what string) error {
	return w.fail("empty %s", what)
}

// memberSet returns the members' set, emptied.
func (w *walk) memberSet() *seen {
	if w.members == nil {
		w.members = newSeen(membersBits)
	}
	w.members.clear()
	return w.members
}

// member reads a string and reports whether it was read before in this
// value.
func (w *walk) member(set *seen) (dup bool, err error) {
	sum, err := w.hashString()
	if err != nil {
		return false, err
	}
	return set.add(sum), nil
}

func (w *walk) list() error {
	n, err := w.length()
	if err != nil {
		return err
	}
	if n == 0 {
		return w.empty("list")
	}
	for range n {
		if err := w.skipString(); err != nil {
			return err
		}
	}
	return nil
}

func (w *walk) set() error {
	n, err := w.length()
	if err != nil {
		return err
	}
	if n == 0 {
		return w.empty("set")
	}
	set := w.memberSet()
	for range n {
		dup, err := w.member(set)
		if err != nil {
			return err
		}
		if dup {
			return w.fail("duplicate set members detected")
		}
	}
	return nil
}

func (w *walk) zset(t byte) error {
	n, err := w.length()
	if err != nil {
		return err
	}
	if n == 0 {
		return w.empty("sorted set")
	}
	set := w.memberSet()
	for range n {
		dup, err := w.member(set)
		if err != nil {
			return err
		}
		var nan bool
		if t == typeZset2 {
			var b [8]byte
			if err := w.in.full(b[:]); err != nil {
				return err
			}
			nan = math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(b[:])))
		} else if nan, err = w.doubleString(); err != nil {
			return err
		}
		if nan {
			return w.fail("zset with NAN score detected")
		}
		if dup {
			return w.fail("duplicate zset fields detected")
		}
	}
	return nil
}

// doubleString reads an old-style score (rdbLoadDoubleValue): a length
// byte, 253 for NaN, 254 and 255 for the infinities, else that many
// characters that sscanf("%lg") must read. It reports a NaN.
func (w *walk) doubleString() (nan bool, err error) {
	n, err := w.in.byte()
	if err != nil {
		return false, err
	}
	switch n {
	case 253:
		return true, nil
	case 254, 255:
		return false, nil
	}
	var buf [255]byte
	b := buf[:n]
	if err := w.in.full(b); err != nil {
		return false, err
	}
	ok, nan := scanDouble(b)
	if !ok {
		return false, w.fail("invalid double value %q", b)
	}
	return nan, nil
}

func (w *walk) hash() error {
	n, err := w.length()
	if err != nil {
		return err
	}
	if n == 0 {
		return w.empty("hash")
	}
	set := w.memberSet()
	for range n {
		if err := w.hashField(set); err != nil {
			return err
		}
	}
	return nil
}

// hashField reads one field of a hash (remembered in set, so that a field
// seen twice fails) and its value.
func (w *walk) hashField(set *seen) error {
	dup, err := w.member(set)
	if err != nil {
		return err
	}
	if err := w.skipString(); err != nil {
		return err
	}
	if dup {
		return w.fail("duplicate hash fields detected")
	}
	return nil
}

// hashMetadata reads Redis 7.4's hash with field expiry: (for the GA type)
// the smallest expire time, then the fields, each with its TTL: relative to
// that time plus one for the GA type (0 for none), absolute for the
// release candidates' type.
func (w *walk) hashMetadata(t byte) error {
	var minExpire uint64
	if t == typeHashMetadata {
		var b [8]byte
		if err := w.in.full(b[:]); err != nil {
			return err
		}
		minExpire = binary.LittleEndian.Uint64(b[:])
		if minExpire > expireTimeInvalid {
			return w.fail("hash read invalid minExpire value")
		}
	}
	n, err := w.length()
	if err != nil {
		return err
	}
	if n == 0 {
		return w.empty("hash")
	}
	set := w.memberSet()
	for range n {
		ttl, err := w.lengthAny()
		if err != nil {
			return err
		}
		expireAt := ttl
		if t == typeHashMetadata && ttl != 0 {
			expireAt = ttl + minExpire - 1
		}
		if expireAt > expireTimeMax {
			return w.fail("invalid expireAt time: %d", expireAt)
		}
		if err := w.hashField(set); err != nil {
			return err
		}
	}
	return nil
}

// quicklist reads a list of nodes: ziplists (type 14), or listpacks and
// plain elements each after its container kind (type 18). Empty nodes are
// skipped; a list of nothing but empty nodes is an empty key.
func (w *walk) quicklist(t byte) error {
	n, err := w.length()
	if err != nil {
		return err
	}
	if n == 0 {
		return w.empty("list")
	}
	elements := false
	for range n {
		container := uint64(containerPacked)
		if t == typeListQuicklist2 {
			if container, err = w.length(); err != nil {
				return err
			}
			if container != containerPlain && container != containerPacked {
				return w.fail("quicklist integrity check failed: container %d", container)
			}
		}
		h, err := w.head()
		if err != nil {
			return err
		}
		if h.size == 0 {
			return w.fail("empty quicklist node")
		}
		s := w.open(h)
		var count uint32
		switch {
		case container == containerPlain:
			if ok, err := s.skip(h.size, nil); err != nil || !ok {
				return w.lzfErr(err)
			}
			count = 1
		case t == typeListQuicklist2:
			count, err = w.listpack(s, h.size, lpPlain, "listpack")
		default:
			count, err = w.ziplist(s, h.size, zlPlain, "ziplist")
		}
		if err != nil {
			return err
		}
		if err := w.close(s); err != nil {
			return err
		}
		elements = elements || count > 0
	}
	if !elements {
		return w.empty("list")
	}
	return nil
}

// lzfErr turns a src's failure (err nil: the LZF stream refused) into an
// error.
func (w *walk) lzfErr(err error) error {
	if err != nil {
		return err
	}
	return w.fail(errLZF)
}

// encoded reads a value stored as one blob: a zipmap, ziplist, intset or
// listpack, checked as Redis checks it with deep sanitization (as
// redis-check-rdb loads).
func (w *walk) encoded(t byte) error {
	if t == typeHashListpackEx {
		if err := w.in.skip(8); err != nil { // the smallest expire time
			return err
		}
	}
	h, err := w.head()
	if err != nil {
		return err
	}
	s := w.open(h)
	var count uint32
	switch t {
	case typeHashZipmap:
		err = w.zipmap(s, h.size)
		count = 1
	case typeListZiplist:
		count, err = w.ziplist(s, h.size, zlPlain, "list ziplist")
	case typeSetIntset:
		err = w.intset(s, h.size)
		count = 1
	case typeZsetZiplist:
		count, err = w.ziplist(s, h.size, zlZset, "zset ziplist")
	case typeHashZiplist:
		count, err = w.ziplist(s, h.size, zlPairs, "hash ziplist")
	case typeHashListpack:
		count, err = w.listpack(s, h.size, lpPairs, "hash listpack")
	case typeZsetListpack:
		count, err = w.listpack(s, h.size, lpZset, "zset listpack")
	case typeSetListpack:
		count, err = w.listpack(s, h.size, lpSet, "set listpack")
	case typeHashListpackExPre, typeHashListpackEx:
		count, err = w.listpack(s, h.size, lpTriples, "hash listpack with TTLs")
	default:
		return w.fail("unknown RDB encoding type %d", t)
	}
	if err != nil {
		return err
	}
	if err := w.close(s); err != nil {
		return err
	}
	if count == 0 {
		return w.empty(typeName(t))
	}
	return nil
}

// typeName names a value type in an error.
func typeName(t byte) string {
	switch t {
	case typeListZiplist:
		return "list"
	case typeZsetZiplist, typeZsetListpack:
		return "sorted set"
	case typeSetListpack:
		return "set"
	}
	return "hash"
}

// A sorted set's listpack or ziplist holds its scores as integers or as
// strings, which Redis reads with strtod when it converts the set to a
// skiplist: at load, if the set has more members than
// zset-max-listpack-entries (128 by default), and a NaN score then fails
// an assertion (zslInsert). The walker cannot know the replicas' setting,
// and Redis never writes a NaN score: it refuses one whatever the size,
// as redis-check-rdb (and a replica at the default) does past 128 members.
const zsetListpackEntries = 128

// scoreBuffer is how much of a score string Redis's zzlStrtod reads.
const scoreBuffer = 127

// scoreNaN reports whether strtod reads the start of a score string as a
// NaN: white space, a sign, then "nan" in any case (the string ends at a
// NUL).
func scoreNaN(b []byte) bool {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	return len(b)-i >= 3 && bytes.EqualFold(b[i:i+3], []byte("nan"))
}

// zsetScoreNaN is the fault of a sorted set's blob of n members with a NaN
// score.
func (w *walk) zsetScoreNaN(n uint32, what string) error {
	r := ruleReplica
	if n > zsetListpackEntries {
		r = ruleLoader
	}
	return w.failRule(r, "%s with NAN score detected", what)
}
