package rdbcheck

import (
	"bytes"
	"math"
)

// Aux fields are pairs of strings that a loader skips unless it knows them.
// Redis reads none in a way that can fail; Valkey 8, which loads versions up
// to 11, reads two:
//
//   - "slot-info" (any case, as a C string): sscanf(value, "%i,%lu,%lu")
//     must read three numbers, or the load fails.
//   - "cluster-slot-states" (any case): a cluster-mode replica parses it
//     as "<slot><'<' or '>'><40-character node name>," repeated, and fails
//     the load on anything else. (A key with a NUL after those 19 bytes
//     is found or not by Valkey's hash of the whole key, which is seeded
//     at random: the walker does not check that value.)

const (
	auxSlotInfo          = "slot-info"
	auxClusterSlotStates = "cluster-slot-states"
	clusterNameLen       = 40
)

// aux reads an aux field.
func (w *walk) aux() error {
	n, err := w.smallString()
	if err != nil {
		return err
	}
	key := w.small[:min(n, uint64(len(w.small)))]
	var sc valueScanner
	switch {
	case w.version > versionSetListpack:
	case bytes.EqualFold(cString(key, n), []byte(auxSlotInfo)):
		sc = &slotInfoScan{}
	case n == uint64(len(auxClusterSlotStates)) && bytes.EqualFold(key, []byte(auxClusterSlotStates)):
		sc = &slotStatesScan{}
	}
	if sc == nil {
		return w.skipString()
	}
	h, err := w.head()
	if err != nil {
		return err
	}
	s := w.open(h)
	done := false
	for range h.size {
		b, ok, err := s.byte()
		if err != nil || !ok {
			return w.lzfErr(err)
		}
		if b == 0 { // the value is read as a C string
			done = true
		}
		if !done {
			done = sc.feed(b)
		}
	}
	if !sc.end() {
		return w.failRule(ruleReplica, "Valkey cannot parse the aux field %q", key)
	}
	return w.close(s)
}

// cString is the C string of a string of n bytes whose first bytes are b:
// up to its first NUL. A string longer than b with no NUL in b is returned
// as b plus one byte, so that it equals no shorter name.
func cString(b []byte, n uint64) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	if n > uint64(len(b)) {
		return append(b[:len(b):len(b)], 0)
	}
	return b
}

// valueScanner reads an aux value a byte at a time: feed returns true once
// the verdict no longer depends on what follows; end gives the verdict.
type valueScanner interface {
	feed(c byte) (decided bool)
	end() bool
}

// slotInfoScan is glibc's sscanf(s, "%i,%lu,%lu") >= 3: each number after
// white space and a sign; %i reads "0x" and hexadecimal digits (none is a
// zero), "0" and octal digits, or decimal digits; %lu decimal digits; the
// commas must follow the numbers at once.
type slotInfoScan struct {
	conv    int // the conversion being read: 0 (%i), 1 and 2 (%lu)
	state   scanState
	decided bool
	ok      bool
}

type scanState uint8

const (
	scanSpace scanState = iota // white space before a number
	scanSign                   // after the sign
	scanZero                   // %i after a leading 0
	scanHex
	scanOct
	scanDec
	scanComma // a comma must follow
)

func (s *slotInfoScan) feed(c byte) bool {
	if s.decided {
		return true
	}
	switch s.state {
	case scanSpace, scanSign:
		switch {
		case s.state == scanSpace && isSpace(c):
		case s.state == scanSpace && (c == '+' || c == '-'):
			s.state = scanSign
		case s.conv == 0 && c == '0':
			s.state = scanZero
		case isDigit(c):
			s.state = scanDec
		default:
			s.decided = true
		}
	case scanZero:
		switch {
		case c == 'x' || c == 'X':
			s.state = scanHex
		case c >= '0' && c <= '7':
			s.state = scanOct
		default:
			s.number(c)
		}
	case scanHex:
		if !isHex(c) {
			s.number(c)
		}
	case scanOct:
		if c < '0' || c > '7' {
			s.number(c)
		}
	case scanDec:
		if !isDigit(c) {
			s.number(c)
		}
	}
	return s.decided
}

// number ends a number at c, which is not part of it.
func (s *slotInfoScan) number(c byte) {
	if s.conv == 2 {
		s.decided, s.ok = true, true
		return
	}
	if c != ',' {
		s.decided = true
		return
	}
	s.conv++
	s.state = scanSpace
}

func (s *slotInfoScan) end() bool {
	if s.decided {
		return s.ok
	}
	return s.conv == 2 && s.state >= scanZero && s.state <= scanDec
}

// slotStatesScan is Valkey's clusterDecodeOpenSlotsAuxField: segments of
// atoi(slot) within [0, 16384), anything up to a '<' or '>', 40 characters
// that are no comma, and a comma; an empty value is fine.
type slotStatesScan struct {
	phase   slotPhase
	mag     uint64 // atoi's digits so far
	over    bool   // they passed 2^64: strtol saturates
	neg     bool
	name    int // characters of the node name so far
	decided bool
	ok      bool
}

type slotPhase uint8

const (
	slotStart  slotPhase = iota // a segment starts (or the value ends)
	slotSpace                   // atoi: white space
	slotDigits                  // atoi: after a sign, or in the digits
	slotSeek                    // looking for '<' or '>'
	slotName                    // the node name
	slotComma                   // the comma after it
)

func (s *slotStatesScan) feed(c byte) bool {
	if s.decided {
		return true
	}
	switch s.phase {
	case slotStart, slotSpace:
		s.mag, s.over, s.neg, s.name = 0, false, false, 0
		switch {
		case isSpace(c):
			s.phase = slotSpace
			return false
		case c == '+' || c == '-':
			s.neg = c == '-'
			s.phase = slotDigits
			return false
		case isDigit(c):
			s.phase = slotDigits
			s.digit(c)
			return false
		}
		s.endSlot()
		s.seek(c)
	case slotDigits:
		if isDigit(c) {
			s.digit(c)
			return false
		}
		s.endSlot()
		s.seek(c)
	case slotSeek:
		s.seek(c)
	case slotName:
		if c == ',' {
			s.decided = true // fewer than 40 characters
			break
		}
		s.name++
		if s.name == clusterNameLen {
			s.phase = slotComma
		}
	case slotComma:
		if c != ',' {
			s.decided = true
			break
		}
		s.phase = slotStart
	}
	return s.decided
}

// digit adds a digit to atoi's number.
func (s *slotStatesScan) digit(c byte) {
	d := uint64(c - '0')
	if s.mag > (^uint64(0)-d)/10 {
		s.over = true
		return
	}
	s.mag = s.mag*10 + d
}

// endSlot checks atoi's value once the number ends: strtol's long,
// saturated at LONG_MIN and LONG_MAX, cast to an int (its low 32 bits).
func (s *slotStatesScan) endSlot() {
	var v int64
	switch {
	case s.neg && (s.over || s.mag > 1<<63):
		v = math.MinInt64
	case s.neg:
		v = -int64(s.mag)
	case s.over || s.mag > math.MaxInt64:
		v = math.MaxInt64
	default:
		v = int64(s.mag)
	}
	if slot := int32(v); slot < 0 || slot >= clusterSlots {
		s.decided = true
	}
}

func (s *slotStatesScan) seek(c byte) {
	if s.decided {
		return
	}
	s.phase = slotSeek
	if c == '<' || c == '>' {
		s.phase = slotName
	}
}

func (s *slotStatesScan) end() bool {
	if s.decided {
		return s.ok
	}
	return s.phase == slotStart
}
