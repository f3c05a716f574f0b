package rdbcheck

import (
	"hash/maphash"
)

// A stream (t_stream.c, rdbLoadObject):
//
//	<node count> (<node key: a 16-byte string, the master ID> <listpack>)...
//	<length> <last ID: ms, seq> [v2+: <first ID> <max deleted ID> <entries added>]
//	<group count> (<name> <last delivered ID> [v2+: <entries read>]
//	    <pending count> (<ID: 16 bytes> <delivery time: 8 bytes> <delivery count>)...
//	    <consumer count> (<name> <seen time: 8 bytes> [v3: <active time: 8 bytes>]
//	        <pending count> (<ID: 16 bytes>)...)...)...
//
// Redis refuses a node key that is not 16 bytes or that comes twice, a
// listpack that streamValidateListpackIntegrity refuses, a length with no
// node, a group name twice, a pending ID twice in a group, a consumer name
// twice in a group, a consumer's pending ID that its group does not have
// or that a consumer already has (two consumers sharing an entry, or one
// having it twice: refused since the 2026 security releases, 7.2.15 and
// 7.4.10, and in Debian's 7.0.15), and (deep sanitization) a group's
// pending ID that no consumer has.

func (w *walk) stream(t byte) error {
	nodes, err := w.length()
	if err != nil {
		return err
	}
	keys := w.memberSet()
	for range nodes {
		n, err := w.smallString()
		if err != nil {
			return err
		}
		if n != streamIDSize {
			return w.fail("stream node key entry is not the size of a stream ID")
		}
		if keys.add(maphash.Bytes(w.seed, w.small[:streamIDSize])) {
			return w.fail("listpack re-added with existing key")
		}
		h, err := w.head()
		if err != nil {
			return err
		}
		s := w.open(h)
		if err := w.streamListpack(s, h.size); err != nil {
			return err
		}
		if err := w.close(s); err != nil {
			return err
		}
	}
	length, err := w.lengthAny()
	if err != nil {
		return err
	}
	ids := 2 // the last ID
	if t >= typeStreamListpacks2 {
		ids += 5 // the first ID, the max deleted ID, entries added
	}
	for range ids {
		if _, err := w.lengthAny(); err != nil {
			return err
		}
	}
	if length != 0 && nodes == 0 {
		return w.fail("stream length inconsistent with rax entries")
	}
	groupCount, err := w.length()
	if err != nil {
		return err
	}
	if w.groups == nil {
		w.groups = newSeen(groupsBits)
		w.consumers = newSeen(consumersBits)
		w.pel = newSeen(pelBits)
		w.ownPEL = newSeen(ownPELBits)
	}
	w.groups.clear()
	for range groupCount {
		if err := w.group(t); err != nil {
			return err
		}
	}
	return nil
}

// group reads one consumer group.
func (w *walk) group(t byte) error {
	dup, err := w.member(w.groups)
	if err != nil {
		return err
	}
	if dup {
		return w.fail("duplicated consumer group name")
	}
	ids := 2 // the last delivered ID
	if t >= typeStreamListpacks2 {
		ids++ // entries read
	}
	for range ids {
		if _, err := w.lengthAny(); err != nil {
			return err
		}
	}
	pending, err := w.length()
	if err != nil {
		return err
	}
	w.pel.clear()
	for range pending {
		sum, err := w.streamID()
		if err != nil {
			return err
		}
		if w.pel.add(sum) {
			return w.fail("duplicated global PEL entry loading stream consumer group")
		}
		if err := w.in.skip(8); err != nil { // delivery time
			return err
		}
		if _, err := w.lengthAny(); err != nil { // delivery count
			return err
		}
	}
	consumers, err := w.length()
	if err != nil {
		return err
	}
	w.consumers.clear()
	for range consumers {
		if err := w.consumer(t); err != nil {
			return err
		}
	}
	if w.pel.unmarked() {
		return w.fail("stream CG PEL entry without consumer")
	}
	return nil
}

// consumer reads one consumer of a group.
func (w *walk) consumer(t byte) error {
	dup, err := w.member(w.consumers)
	if err != nil {
		return err
	}
	if dup {
		return w.fail("duplicate stream consumer detected")
	}
	times := uint64(8) // seen time
	if t >= typeStreamListpacks3 {
		times += 8 // active time
	}
	if err := w.in.skip(times); err != nil {
		return err
	}
	pending, err := w.length()
	if err != nil {
		return err
	}
	w.ownPEL.clear()
	for range pending {
		sum, err := w.streamID()
		if err != nil {
			return err
		}
		slot, found := w.pel.find(sum)
		switch {
		case found && w.pel.marked(slot):
			return w.fail("stream consumer PEL entry already has a consumer assigned")
		case found:
			w.pel.mark(slot)
		case !w.pel.over:
			return w.fail("consumer entry not found in group global PEL")
		}
		if w.ownPEL.add(sum) {
			return w.fail("duplicated consumer PEL entry loading a stream consumer group")
		}
	}
	return nil
}

// streamID reads a raw 16-byte stream ID and returns its hash.
func (w *walk) streamID() (uint64, error) {
	id := w.small[:streamIDSize]
	if err := w.in.full(id); err != nil {
		return 0, err
	}
	return maphash.Bytes(w.seed, id), nil
}

// streamListpack checks a stream node's listpack as
// streamValidateListpackIntegrity does: the listpack's header, then its
// entries as a stream lays them out, each checked as a listpack entry:
//
//	master entry: <count> <deleted> <field count> <field>... <0>
//	entry: <flags> <ms delta> <seq delta> [<field count> if not SAMEFIELDS]
//	       (<field> if not SAMEFIELDS, <value>)... <entry size in listpack entries>
//
// with count+deleted entries, then the listpack's end. The numbers must be
// integers (or strings string2ll reads). The header's entry count is not
// checked, and the bytes after the end-of-entries 0xff are not read but
// for the last, which must be 0xff too.
func (w *walk) streamListpack(s *src, size uint64) error {
	var it lpIter
	if err := it.init(w, s, size, "stream listpack"); err != nil {
		return err
	}
	// entry reads the next entry, which must be one.
	entry := func(mode lpMode) (lpEntry, error) {
		e, err := it.next(mode)
		if err == nil && e.eof {
			err = it.fail("an entry is missing")
		}
		return e, err
	}
	// num reads the next entry as a number.
	num := func() (int64, error) {
		e, err := entry(lpInt)
		if err == nil && !e.isInt && !e.strInt {
			err = it.fail("an entry is not a number")
		}
		return e.ival, err
	}
	skip := func(n int64) error {
		for ; n > 0; n-- {
			if _, err := entry(lpSkip); err != nil {
				return err
			}
		}
		return nil
	}
	count, err := num()
	if err != nil {
		return err
	}
	deleted, err := num()
	if err != nil {
		return err
	}
	masterFields, err := num()
	if err != nil {
		return err
	}
	if err := skip(masterFields); err != nil {
		return err
	}
	if zero, err := num(); err != nil {
		return err
	} else if zero != 0 {
		return it.fail("the master entry does not end with 0")
	}
	for entries := count + deleted; entries != 0; entries-- {
		flags, err := num()
		if err != nil {
			return err
		}
		for range 2 { // the ID's deltas
			if _, err := num(); err != nil {
				return err
			}
		}
		fields, extra := masterFields, int64(3)
		if flags&streamFlagSameFields == 0 {
			if fields, err = num(); err != nil {
				return err
			}
			if err := skip(fields); err != nil {
				return err
			}
			extra += fields + 1
		}
		if err := skip(fields); err != nil {
			return err
		}
		lpCount, err := num()
		if err != nil {
			return err
		}
		if lpCount != fields+extra {
			return it.fail("an entry's size is not its own")
		}
	}
	e, err := it.next(lpSkip)
	if err != nil {
		return err
	}
	if !e.eof {
		return it.fail("entries after the last")
	}
	// The listpack was checked up to that 0xff; its last byte must be one.
	if it.pos < size {
		if ok, err := s.skip(size-1-it.pos, nil); err != nil || !ok {
			return w.lzfErr(err)
		}
		last, ok, err := s.byte()
		if err != nil || !ok {
			return w.lzfErr(err)
		}
		if last != lpEOF {
			return it.fail("the last byte is not 0xff")
		}
	}
	return nil
}
