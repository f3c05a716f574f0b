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
