package rdbcheck

import "testing"

func TestSeen(t *testing.T) {
	h := func(i uint64) uint64 { return i * 0x9e3779b97f4a7c15 }
	s := newSeen(4) // 16 slots, 8 remembered
	for i := range uint64(8) {
		if s.add(h(i)) {
			t.Fatalf("hash %d: a duplicate in a set that never held it", i)
		}
	}
	if !s.add(h(3)) || s.over {
		t.Fatal("a hash held is not found again")
	}
	if s.add(h(99)) || !s.over {
		t.Fatal("a hash past the limit is remembered, or over is not set")
	}
	if s.add(h(99)) {
		t.Fatal("a hash past the limit was remembered")
	}
	if _, found := s.find(h(5)); !found {
		t.Fatal("find misses a hash held")
	}
	if !s.unmarked() {
		t.Fatal("nothing marked, yet unmarked says no")
	}
	for i := range uint64(8) {
		slot, _ := s.find(h(i))
		s.mark(slot)
	}
	if s.unmarked() {
		t.Fatal("all marked, yet unmarked says yes")
	}
	if _, found := s.find(h(5) | seenMark); !found {
		t.Fatal("the mark bit is part of the hash compared")
	}
	s.clear()
	if s.over || len(s.used) != 0 || s.add(h(5)) {
		t.Fatal("clear left something behind")
	}
	for _, v := range s.slots {
		if v != 0 && v != h(5)&^seenMark|seenHeld {
			t.Fatalf("clear left slot %x", v)
		}
	}
}

// TestSeenGrows: the table doubles as it fills, keeping every hash and
// mark, up to its largest; then it stops remembering.
func TestSeenGrows(t *testing.T) {
	h := func(i uint64) uint64 { return i*0x9e3779b97f4a7c15 + 12345 }
	s := newSeen(12)
	if len(s.slots) != 1<<seenFirstBits {
		t.Fatalf("a new set has %d slots", len(s.slots))
	}
	for i := range uint64(2048) {
		if s.add(h(i)) {
			t.Fatalf("hash %d: a duplicate", i)
		}
		if i%3 == 0 {
			slot, _ := s.find(h(i))
			s.mark(slot)
		}
	}
	if len(s.slots) != 1<<12 || s.over {
		t.Fatalf("%d slots, over %v, after 2048 hashes", len(s.slots), s.over)
	}
	for i := range uint64(2048) {
		slot, found := s.find(h(i))
		if !found || s.marked(slot) != (i%3 == 0) {
			t.Fatalf("hash %d: found %v, marked %v after growing", i, found, s.marked(slot))
		}
	}
	if s.add(h(5000)) || !s.over || len(s.slots) != 1<<12 {
		t.Fatal("the set grew past its largest table")
	}
	s.clear()
	if len(s.used) != 0 || s.add(h(7)) {
		t.Fatal("clear left something behind")
	}
}
