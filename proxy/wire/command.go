package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"slices"
	"sync/atomic"
)

// Command is one command read by a [CommandReader].
type Command struct {
	// Args holds the arguments, the command name first. It is empty for an empty inline line
	// ("\n" or "\r\n", which a loading replica sends as a keepalive and Redis takes as
	// "refresh the ACK time"), for a blank inline line, and for a multibulk count <= 0,
	// all of which Redis skips without running anything.
	//
	// Args and its elements belong to the caller: the reader never touches them again. All
	// elements share one backing array, each capped at its own length.
	Args [][]byte
	// Inline reports that the command came as an inline line rather than a multibulk.
	Inline bool
}

// CommandReader reads commands from a client, a replica or a primary on the control path,
// as redis-server's processInlineBuffer and processMultibulkBuffer do, within [Limits].
// It owns a bufio.Reader over the connection.
//
// Any error is sticky: after a [*ProtocolError], an I/O error or io.EOF, every later call
// returns the same error, and the caller closes the connection. A CommandReader is not safe
// for concurrent use.
type CommandReader struct {
	br   *bufio.Reader
	lim  Limits
	line []byte // holds a line longer than br's buffer; at most lim.MaxInlineLine+1 bytes
	err  error  // sticky; the first error returned

	// held is rawCap plus the capacity of line: what the reader holds beyond its fixed
	// bufio buffer. Atomic: QueryBytes may be called from any goroutine.
	held   atomic.Int64
	rawCap int // capacity of the command being read
}

// NewCommandReader returns a reader of r with limits lim (zero fields mean the defaults).
func NewCommandReader(r io.Reader, lim Limits) *CommandReader {
	return &CommandReader{br: bufio.NewReaderSize(r, ReadBufferSize), lim: lim.withDefaults()}
}

// SetLimits replaces the limits (zero fields mean the defaults) from the next command on,
// for example when a client authenticates. Like ReadCommand, it is called by the reader's
// owner only.
func (r *CommandReader) SetLimits(lim Limits) { r.lim = lim.withDefaults() }

// Limits returns the limits in force, defaults filled in.
func (r *CommandReader) Limits() Limits { return r.lim }

// QueryBytes returns the bytes the reader holds beyond its fixed read buffer: the command
// being read and the scratch for a long line. It is Redis's query buffer, for memory
// accounting, and unlike every other method it is safe to call from any goroutine.
func (r *CommandReader) QueryBytes() int64 { return r.held.Load() }

// ReadCommand reads the next command. It returns io.EOF when the peer closed the connection
// between commands, io.ErrUnexpectedEOF when it closed in the middle of one, and a
// [*ProtocolError] for bytes Redis would reject.
//
// Lines end at LF. Inline lines may end in CRLF; multibulk header lines and the end of each
// bulk must be CRLF (Redis skips the two bytes after a bulk unchecked; we refuse them).
func (r *CommandReader) ReadCommand() (Command, error) {
	if r.err != nil {
		return Command{}, r.err
	}
	cmd, err := r.readCommand()
	r.rawCap = 0 // the command now belongs to the caller
	r.noteHeld()
	if err != nil {
		r.err = err
		return Command{}, err
	}
	return cmd, nil
}

func (r *CommandReader) readCommand() (Command, error) {
	first, err := r.br.Peek(1)
	if err != nil {
		return Command{}, err
	}
	if first[0] != '*' {
		return r.readInline()
	}
	return r.readMultibulk()
}

func (r *CommandReader) readInline() (Command, error) {
	line, err := r.readLine(r.lim.MaxInlineLine, msgTooBigInline)
	if err != nil {
		return Command{}, err
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	args, ok := SplitArgs(line)
	if !ok {
		return Command{}, protocolError(msgUnbalancedQuotes)
	}
	return Command{Args: args, Inline: true}, nil
}

func (r *CommandReader) readMultibulk() (Command, error) {
	if _, err := r.br.ReadByte(); err != nil { // the '*' Peek saw
		return Command{}, err
	}
	line, err := r.readLine(r.lim.MaxInlineLine, msgTooBigMultibulk)
	if err != nil {
		return Command{}, err
	}
	count, ok := parseHeader(line)
	if !ok || count > int64(r.lim.MaxArgs) {
		return Command{}, protocolError(msgInvalidMultibulkLen)
	}
	if r.lim.Unauthenticated && count > RedisUnauthArgs {
		return Command{}, protocolError(msgUnauthMultibulkLen)
	}
	if count <= 0 {
		return Command{}, nil // Redis: "Multibulk processing could see a <= 0 length."
	}
	// raw holds every argument back to back and grows only as bytes arrive: count is at
	// most MaxArgs but still only a claim, so it sizes nothing. Small commands (REPLCONF
	// ACK) fit the first 64 bytes and cost two allocations, raw and Args.
	raw := make([]byte, 0, 64)
	var endsBuf [16]int
	ends := endsBuf[:0]
	for range count {
		n, err := r.readBulkHeader()
		if err != nil {
			return Command{}, err
		}
		if int64(len(raw))+n > r.lim.MaxQuery {
			return Command{}, ErrQueryLimit
		}
		if raw, err = r.appendBulk(raw, n); err != nil {
			return Command{}, err
		}
		ends = append(ends, len(raw))
	}
	return Command{Args: cut(raw, ends)}, nil
}

// readBulkHeader reads "$<len>\r\n" and returns len, checked against MaxBulk.
func (r *CommandReader) readBulkHeader() (int64, error) {
	c, err := r.br.ReadByte()
	if err != nil {
		return 0, noEOF(err)
	}
	if c != '$' {
		return 0, protocolError(expectedDollar(c))
	}
	line, err := r.readLine(r.lim.MaxInlineLine, msgTooBigBulk)
	if err != nil {
		return 0, err
	}
	n, ok := parseHeader(line)
	if !ok || n < 0 || n > r.lim.MaxBulk {
		return 0, protocolError(msgInvalidBulkLen)
	}
	if r.lim.Unauthenticated && n > RedisUnauthBulk {
		return 0, protocolError(msgUnauthBulkLen)
	}
	return n, nil
}

// appendBulk appends the n bytes of a bulk to dst and consumes its CRLF. It grows dst by at
// most bulkChunk beyond the bytes received, so memory follows the data, not the header.
func (r *CommandReader) appendBulk(dst []byte, n int64) ([]byte, error) {
	for n > 0 {
		k := int(min(n, bulkChunk))
		if cap(dst)-len(dst) < k {
			dst = slices.Grow(dst, k)
			r.rawCap = cap(dst)
			r.noteHeld()
		}
		got, err := io.ReadFull(r.br, dst[len(dst):len(dst)+k])
		dst = dst[:len(dst)+got]
		if err != nil {
			return dst, noEOF(err)
		}
		n -= int64(k)
	}
	for _, want := range [2]byte{'\r', '\n'} {
		c, err := r.br.ReadByte()
		if err != nil {
			return dst, noEOF(err)
		}
		if c != want {
			return dst, protocolError(msgBadBulkEnding)
		}
	}
	return dst, nil
}

// cut slices raw at ends into one argument each.
func cut(raw []byte, ends []int) [][]byte {
	if len(ends) == 0 {
		return nil
	}
	args := make([][]byte, len(ends))
	start := 0
	for i, end := range ends {
		args[i] = raw[start:end:end]
		start = end
	}
	return args
}

// ReadReplyLine reads one line of at most limit bytes, not counting its LF or a CR before
// the LF, which are dropped. It reads replies from a primary during the handshake: "+PONG",
// "+FULLRESYNC <replid> <offset>", "$<len>", or "" for a keepalive newline. It returns
// [ErrLineTooLong] for a longer line, io.ErrUnexpectedEOF if the connection ends inside a
// line. The returned slice belongs to the caller.
func (r *CommandReader) ReadReplyLine(limit int) ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	limit = max(0, min(limit, math.MaxInt-1))
	line, err := r.readLine(limit+1, "") // +1 for a CR
	if err == nil {
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) > limit {
			err = ErrLineTooLong
		}
	}
	if err != nil {
		r.err = err
		return nil, err
	}
	return bytes.Clone(line), nil
}

// Buffered returns the number of bytes read from the connection but not yet consumed.
func (r *CommandReader) Buffered() int { return r.br.Buffered() }

// Reader returns the reader's own buffered view of the connection: the bytes not yet
// consumed, then the connection. After "+CONTINUE", or after a "$<len>" line, the rest is
// raw payload and stream, read from here. Calls to Reader's Read and to the methods of r
// consume the same bytes and must not be interleaved inside a command or line.
func (r *CommandReader) Reader() io.Reader { return r.br }

// readLine returns the next line without its LF. tooLong is the protocol error for a line
// longer than limit; an empty tooLong means [ErrLineTooLong]. The line aliases the reader's
// buffers and is valid until the next read.
func (r *CommandReader) readLine(limit int, tooLong string) ([]byte, error) {
	r.line = r.line[:0]
	for {
		frag, err := r.br.ReadSlice('\n')
		if err == nil {
			frag = frag[:len(frag)-1]
			if len(r.line)+len(frag) > limit {
				return nil, lineTooLong(tooLong)
			}
			if len(r.line) == 0 {
				return frag, nil
			}
			r.line = append(r.line, frag...)
			return r.line, nil
		}
		// Check before copying: the scratch never holds more than limit bytes.
		if len(r.line)+len(frag) > limit {
			return nil, lineTooLong(tooLong)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if err == io.EOF && len(r.line)+len(frag) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		r.line = append(r.line, frag...)
		r.noteHeld()
	}
}

// noteHeld publishes what the reader holds, for QueryBytes.
func (r *CommandReader) noteHeld() { r.held.Store(int64(r.rawCap + cap(r.line))) }

func lineTooLong(msg string) error {
	if msg == "" {
		return ErrLineTooLong
	}
	return protocolError(msg)
}

// noEOF turns io.EOF inside a command into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseHeader parses the number in a "*<n>\r" or "$<n>\r" line whose type byte is already
// consumed: the line must end in CR.
func parseHeader(line []byte) (int64, bool) {
	n := len(line)
	if n == 0 || line[n-1] != '\r' {
		return 0, false
	}
	return ParseInt(line[:n-1])
}

// ParseInt parses s as redis-server's string2ll does, for every integer a client sends: an
// optional '-', then decimal digits with no leading zero ("0" itself is fine, "-0" is not), no
// sign '+', no spaces, fewer than 21 bytes, and no overflow of int64.
func ParseInt(s []byte) (int64, bool) {
	if len(s) == 0 || len(s) >= 21 {
		return 0, false
	}
	if len(s) == 1 && s[0] == '0' {
		return 0, true
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) == 0 || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return int64(-v), true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}
