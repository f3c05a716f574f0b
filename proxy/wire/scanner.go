package wire

import "math"

// Event reports what one [StreamScanner.Feed] saw.
type Event struct {
	// Commands is the number of commands (with at least one argument) that ended in the fed
	// bytes. Empty commands ("\n", "\r\n", "*0\r\n") are not counted.
	Commands int
	// GetAck reports that a REPLCONF GETACK ended in the fed bytes (or, if it was queued in a
	// MULTI, that the EXEC running it did). With several, the fields describe the last.
	GetAck bool
	// GetAckOffset is the offset a Redis replica answers that GETACK with in
	// "REPLCONF ACK <offset>": its reploff, the [StreamScanner.Applied] offset before the
	// GETACK. That is the offset just before the GETACK started, except that bare newlines
	// or "*0" right before it are not yet included (Redis moves reploff only when it
	// processes a non-empty command).
	GetAckOffset int64
}

// scanState is where the [StreamScanner] is in the RESP grammar.
type scanState uint8

const (
	stateCommand    scanState = iota // expecting '*', '\n' or the CR of an empty "\r\n"
	stateInlineLF                    // after a CR where a command starts; expecting LF
	stateCountFirst                  // after '*'; expecting the first digit of the count
	stateCount                       // in the count; expecting a digit or CR
	stateCountLF                     // after the count's CR
	stateDollar                      // expecting the '$' of the next argument
	stateLenFirst                    // after '$'; expecting the first digit of the length
	stateLen                         // in the length; expecting a digit or CR
	stateLenLF                       // after the length's CR
	stateBody                        // inside an argument's bytes
	stateBodyCR                      // after an argument's bytes; expecting CR
	stateBodyLF                      // expecting the LF that ends an argument
)

// nameScratch is how many bytes of the first two arguments the scanner keeps: enough for
// "REPLCONF", the longest command name it recognises.
const nameScratch = 8

// StreamScanner follows a replication stream without parsing it into values: it tracks the
// offset, the command boundaries a replica would apply at, MULTI/EXEC, and REPLCONF GETACK.
// See the package documentation for the grammar and the zero-copy contract.
//
// A StreamScanner is not safe for concurrent use; its owner is the goroutine that reads the
// primary link.
type StreamScanner struct {
	offset  int64 // offset of the last byte scanned without error
	applied int64 // offset after the last non-empty command completed outside MULTI
	multi   bool  // inside MULTI ... EXEC/DISCARD
	ackHeld bool  // a GETACK queued inside the open MULTI; EXEC answers it

	state scanState
	num   int64 // the count or length being read
	argc  int64 // arguments in the current command
	arg   int64 // index of the current argument
	left  int64 // bytes of the current argument still to skip

	// The first bytes and the full lengths of arguments 0 and 1, the command name and its
	// subcommand. Nothing else of the stream is ever copied.
	name, sub       [nameScratch]byte
	nameLen, subLen int64 // full lengths
	nameN, subN     int   // bytes kept in name, sub

	err *ProtocolError // sticky
}

// NewStreamScanner returns a scanner positioned after offset: the first byte fed is
// offset+1. After "+FULLRESYNC <replid> <X>" and the RDB, offset is X; after "+CONTINUE" it
// is the offset asked for in PSYNC minus one.
func NewStreamScanner(offset int64) *StreamScanner {
	s := new(StreamScanner)
	s.Reset(offset)
	return s
}

// Reset forgets all state, including a sticky error, and positions s after offset.
func (s *StreamScanner) Reset(offset int64) {
	*s = StreamScanner{offset: offset, applied: offset}
}

// Offset returns the offset of the last byte scanned: every byte fed so far, or, after an
// error, the byte before the offending one. It is a replica's read_reploff.
func (s *StreamScanner) Offset() int64 { return s.offset }

// Applied returns the offset just after the last command a replica would have processed:
// a non-empty command outside MULTI, or the EXEC or DISCARD that closed one. It is a
// replica's reploff: a relay forwards only bytes up to Applied, and PSYNCs upstream at
// Applied()+1 after losing the link.
func (s *StreamScanner) Applied() int64 { return s.applied }

// InMulti reports whether the last complete command left a MULTI open.
func (s *StreamScanner) InMulti() bool { return s.multi }

// Err returns the sticky error, or nil.
func (s *StreamScanner) Err() error {
	if s.err == nil {
		return nil
	}
	return s.err
}

// Feed scans p, the next bytes of the stream, and reports what ended in them. It does not
// retain p, and never copies from it except up to 8 bytes of each command's first two
// arguments. It runs in O(len(p)) and does not allocate; an argument's bytes are skipped
// by arithmetic.
//
// A [*ProtocolError] stops the scanner at the offending byte (its Offset); the Event still
// describes the commands that ended before it. The error is sticky until [StreamScanner.Reset].
func (s *StreamScanner) Feed(p []byte) (Event, error) {
	var ev Event
	if s.err != nil {
		return ev, s.err
	}
	base := s.offset             // offset of the byte before p[0]; p[i] is at base+i+1
	state, num := s.state, s.num // in registers for the loop; written back at the end
	for i := 0; i < len(p); i++ {
		if state == stateBody {
			n := int64(len(p) - i)
			if n > s.left {
				n = s.left
			}
			s.keep(p[i : i+int(n)])
			s.left -= n
			i += int(n)
			if s.left == 0 {
				state = stateBodyCR
				if i+1 < len(p) && p[i] == '\r' && p[i+1] == '\n' { // fast path: CRLF in p
					i += 2
					state = s.endArg(base+int64(i), &ev)
				}
			}
			i-- // the loop's i++ moves to the first byte not consumed
			continue
		}
		c := p[i]
		switch state {
		case stateCommand:
			if c == '*' {
				state = stateCountFirst
				// Fast path: the whole "*<count>\r\n" is in p.
				if n, next, ok := scanNumber(p, i+1); ok && n <= maxStreamArgs {
					i = next - 1
					state = s.startCommand(n)
				}
				continue
			}
		case stateDollar:
			if c == '$' {
				state = stateLenFirst
				// Fast path: the whole "$<length>\r\n" is in p.
				if n, next, ok := scanNumber(p, i+1); ok {
					i = next - 1
					state = s.startArg(n)
				}
				continue
			}
		}
		var msg string
		if state, num, msg = s.step(state, num, c, base+int64(i)+1, &ev); msg != "" {
			return ev, s.fail(msg, base+int64(i)+1)
		}
	}
	s.state, s.num = state, num
	s.offset = base + int64(len(p))
	return ev, nil
}

// step takes one byte c, at offset off, through the grammar where Feed's loop does not:
// every byte of a count or length that is not whole in the fed bytes (split across feeds,
// or too long for scanNumber), an argument's CRLF split across feeds, bare newlines, and
// every byte that is an error. It returns the state and number after c, or an error's
// message. A stream the primary sends in large reads seldom comes here, so that it stays
// out of Feed's loop.
func (s *StreamScanner) step(state scanState, num int64, c byte, off int64, ev *Event) (scanState, int64, string) {
	switch state {
	case stateCommand: // not '*': Feed takes it
		switch c {
		case '\n': // an empty inline command
		case '\r':
			state = stateInlineLF
		default:
			return state, num, msgInlineFromPeer
		}
	case stateInlineLF:
		if c != '\n' {
			return state, num, msgInlineFromPeer
		}
		state = stateCommand
	case stateCountFirst:
		if c < '0' || c > '9' { // NB: Redis skips a negative count; a primary never sends one
			return state, num, msgInvalidMultibulkLen
		}
		num = int64(c - '0')
		state = stateCount
	case stateCount:
		switch {
		case c == '\r':
			state = stateCountLF
		case c >= '0' && c <= '9' && num != 0: // no leading zero
			num = num*10 + int64(c-'0')
			if num > maxStreamArgs {
				return state, num, msgInvalidMultibulkLen
			}
		default:
			return state, num, msgInvalidMultibulkLen
		}
	case stateCountLF:
		if c != '\n' {
			return state, num, msgInvalidMultibulkLen
		}
		state = s.startCommand(num)
	case stateDollar: // not '$': Feed takes it
		return state, num, expectedDollar(c)
	case stateLenFirst:
		if c < '0' || c > '9' {
			return state, num, msgInvalidBulkLen
		}
		num = int64(c - '0')
		state = stateLen
	case stateLen:
		switch {
		case c == '\r':
			state = stateLenLF
		case c >= '0' && c <= '9' && num != 0:
			d := int64(c - '0')
			if num > (math.MaxInt64-d)/10 { // also bounds the length to 19 digits
				return state, num, msgInvalidBulkLen
			}
			num = num*10 + d
		default:
			return state, num, msgInvalidBulkLen
		}
	case stateLenLF:
		if c != '\n' {
			return state, num, msgInvalidBulkLen
		}
		state = s.startArg(num)
	case stateBodyCR:
		if c != '\r' {
			return state, num, msgBadBulkEnding
		}
		state = stateBodyLF
	case stateBodyLF:
		if c != '\n' {
			return state, num, msgBadBulkEnding
		}
		state = s.endArg(off, ev)
	}
	return state, num, ""
}

// scanNumber parses "<digits>\r\n" at p[j:] when all of it is in p, has no leading zero
// and at most 18 digits (so it cannot overflow). Otherwise ok is false and the byte-wise
// states take over, and find any error at its exact byte.
func scanNumber(p []byte, j int) (n int64, next int, ok bool) {
	k := j
	for k < len(p) && k-j < 18 && '0' <= p[k] && p[k] <= '9' {
		n = n*10 + int64(p[k]-'0')
		k++
	}
	if k == j || k+1 >= len(p) || p[k] != '\r' || p[k+1] != '\n' || p[j] == '0' && k-j > 1 {
		return 0, 0, false
	}
	return n, k + 2, true
}

// startCommand starts a command of argc arguments after its "*<argc>\r\n".
func (s *StreamScanner) startCommand(argc int64) scanState {
	if argc == 0 { // "*0\r\n": an empty command, like "\n"
		return stateCommand
	}
	s.argc, s.arg = argc, 0
	s.nameN, s.subN, s.nameLen, s.subLen = 0, 0, 0, 0
	return stateDollar
}

// startArg starts an argument of n bytes after its "$<n>\r\n".
func (s *StreamScanner) startArg(n int64) scanState {
	switch s.arg {
	case 0:
		s.nameLen = n
	case 1:
		s.subLen = n
	}
	s.left = n
	if n == 0 {
		return stateBodyCR
	}
	return stateBody
}

// endArg ends the current argument at offset end, the offset of its final LF.
func (s *StreamScanner) endArg(end int64, ev *Event) scanState {
	s.arg++
	if s.arg < s.argc {
		return stateDollar
	}
	s.complete(end, ev)
	return stateCommand
}

// keep copies the start of argument 0 or 1 into the scratch arrays.
func (s *StreamScanner) keep(b []byte) {
	switch s.arg {
	case 0:
		s.nameN += copy(s.name[s.nameN:], b)
	case 1:
		s.subN += copy(s.sub[s.subN:], b)
	}
}

// commandKind is what the scanner needs to know about a command.
type commandKind uint8

const (
	kindOther commandKind = iota
	kindMulti
	kindExec
	kindDiscard
	kindGetAck
)

// kind classifies the current command by its name (and subcommand), ignoring case.
func (s *StreamScanner) kind() commandKind {
	switch s.nameLen {
	case 4:
		if EqualFold(s.name[:4], "EXEC") {
			return kindExec
		}
	case 5:
		if EqualFold(s.name[:5], "MULTI") {
			return kindMulti
		}
	case 7:
		if EqualFold(s.name[:7], "DISCARD") {
			return kindDiscard
		}
	case 8:
		// REPLCONF GETACK <x>. replconfCommand wants an odd argc (even is a syntax error).
		if s.argc >= 3 && s.argc%2 == 1 && s.subLen == 6 &&
			EqualFold(s.name[:8], "REPLCONF") && EqualFold(s.sub[:6], "GETACK") {
			return kindGetAck
		}
	}
	return kindOther
}

// complete applies the command that ended at offset end, as a replica's processCommand
// and commandProcessed would.
func (s *StreamScanner) complete(end int64, ev *Event) {
	ev.Commands++
	kind := s.kind()
	if s.multi {
		switch kind {
		case kindExec:
			s.multi = false
			if s.ackHeld { // the queued GETACK runs now; reploff has not moved since MULTI
				ev.GetAck, ev.GetAckOffset = true, s.applied
			}
			s.ackHeld = false
			s.applied = end
		case kindDiscard:
			s.multi, s.ackHeld = false, false
			s.applied = end
		case kindGetAck:
			s.ackHeld = true // queued like any command
		}
		// A nested MULTI gets "MULTI calls can not be nested" and the MULTI stays open.
		return
	}
	switch kind {
	case kindMulti:
		s.multi = true // reploff does not move for MULTI itself
		return
	case kindGetAck:
		ev.GetAck, ev.GetAckOffset = true, s.applied
	}
	s.applied = end
}

// fail records a protocol error at offset off and stops the scanner before it.
func (s *StreamScanner) fail(msg string, off int64) error {
	s.offset = off - 1
	s.err = &ProtocolError{Msg: msg, Offset: off}
	return s.err
}
