package rdbcheck

// seen is a bounded set of 64-bit hashes, for the duplicates Redis's loader
// refuses (keys of a DB, members of a set, fields of a hash, node keys,
// consumer groups, consumers and pending IDs of a stream). It remembers at
// most half as many hashes as its largest table has slots; past that it
// still answers for the hashes it holds but remembers no more, and says so
// (over), so that a duplicate of a hash it did not keep goes unseen. Its
// table starts small and doubles as it fills, up to its largest: a small
// RDB does not pay for a large table.
//
// A slot holds a hash with its low bit set (0 is an empty slot) and bit 1
// free for a mark (a pending ID that a consumer claimed). The table is at
// most half full, so that a lookup of a hash it does not hold (every one,
// once the set is full) probes two or three slots.
type seen struct {
	slots   []uint64
	used    []uint16 // slots in use, so that clear costs what was added
	maxBits uint     // the largest table has 1<<maxBits slots (at most 16)
	over    bool     // a hash was not remembered: the set was full
}

const (
	seenHeld = 1
	seenMark = 2

	seenFirstBits = 6 // the first table's size
)

// newSeen returns an empty set whose largest table has 1<<maxBits slots.
func newSeen(maxBits uint) *seen {
	return &seen{slots: make([]uint64, 1<<min(seenFirstBits, maxBits)), maxBits: maxBits}
}

// limit is how many hashes the set remembers at most.
func (s *seen) limit() int { return 1 << s.maxBits / 2 }

// find returns the slot of h, or the empty slot where it would go.
func (s *seen) find(h uint64) (slot int, found bool) {
	v := h&^seenMark | seenHeld
	mask := len(s.slots) - 1
	for i := int(h>>32) & mask; ; i = (i + 1) & mask {
		switch x := s.slots[i]; {
		case x == 0:
			return i, false
		case x&^seenMark == v:
			return i, true
		}
	}
}

// add reports whether h is in the set, and adds it if it was not and
// there is room.
func (s *seen) add(h uint64) (dup bool) {
	i, found := s.find(h)
	if found {
		return true
	}
	if len(s.used) >= len(s.slots)/2 {
		if len(s.used) >= s.limit() {
			s.over = true
			return false
		}
		s.grow()
		i, _ = s.find(h)
	}
	s.slots[i] = h&^seenMark | seenHeld
	s.used = append(s.used, uint16(i))
	return false
}

// grow doubles the table, moving every hash (and its mark) to its new slot.
func (s *seen) grow() {
	old := s.slots
	s.slots = make([]uint64, 2*len(old))
	for k, i := range s.used {
		v := old[i]
		j, _ := s.find(v)
		s.slots[j] = v
		s.used[k] = uint16(j)
	}
}

// mark marks h's slot (found by find).
func (s *seen) mark(slot int) { s.slots[slot] |= seenMark }

// marked reports whether h's slot (found by find) is marked.
func (s *seen) marked(slot int) bool { return s.slots[slot]&seenMark != 0 }

// unmarked reports whether some hash held was never marked.
func (s *seen) unmarked() bool {
	for _, i := range s.used {
		if s.slots[i]&seenMark == 0 {
			return true
		}
	}
	return false
}

// clear empties the set; its table keeps its size.
func (s *seen) clear() {
	for _, i := range s.used {
		s.slots[i] = 0
	}
	s.used = s.used[:0]
	s.over = false
}
