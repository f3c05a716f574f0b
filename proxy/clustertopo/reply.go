package clustertopo

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/replproxy/replproxy/proxy/wire"
)

// Limits bound what one reply of a node may cost. Every length a reply
// announces is checked against them before anything is allocated from it,
// and buffers grow with the bytes that arrive, not with the lengths
// announced. A zero field means its default ([DefaultLimits]).
type Limits struct {
	// MaxReplyBytes is the most bytes one reply may take on the wire:
	// default 8 MiB. CLUSTER NODES of a cluster of a thousand nodes is a
	// few hundred KiB; CLUSTER SLOTS of a cluster whose slots are split
	// into thousands of ranges is a few MiB.
	MaxReplyBytes int
	// MaxValues is the most values (strings, integers, arrays) one reply
	// may hold, nested ones included: default 262144. Each costs about 56
	// bytes once decoded, so the default holds a decoded reply under 15 MiB
	// besides its strings.
	MaxValues int
}

// The defaults of [Limits], and what no configuration changes.
const (
	DefaultMaxReplyBytes = 8 << 20
	DefaultMaxValues     = 1 << 18
	// maxDepth is how deep arrays may nest: CLUSTER SHARDS and CLUSTER SLOTS
	// nest four deep (a shard, its nodes, a node, its fields); a deeper reply
	// is refused before it can exhaust the stack.
	maxDepth = 8
	// maxLine is the longest line (a simple string, an error, an integer, a
	// length), without its CRLF.
	maxLine = 4 << 10
	// readBuffer is the reader's buffer size: more than maxLine, so that a
	// line of the longest allowed fits in it.
	readBuffer = 16 << 10
	// bulkChunk is how far ahead of the bytes that arrived a bulk string's
	// buffer grows.
	bulkChunk = 64 << 10
	// arrayChunk is how many elements an array's slice holds before its
	// elements arrive.
	arrayChunk = 256
)

// DefaultLimits returns the limits a zero [Limits] stands for.
func DefaultLimits() Limits {
	return Limits{MaxReplyBytes: DefaultMaxReplyBytes, MaxValues: DefaultMaxValues}
}

// withDefaults fills the unset fields of l.
func (l Limits) withDefaults() Limits {
	if l.MaxReplyBytes <= 0 {
		l.MaxReplyBytes = DefaultMaxReplyBytes
	}
	if l.MaxValues <= 0 {
		l.MaxValues = DefaultMaxValues
	}
	return l
}

// ErrReplyTooLarge is returned (wrapped) when a reply goes over its
// [Limits] or nests deeper than a cluster command's reply does.
var ErrReplyTooLarge = errors.New("reply over its limits")

// errProtocol is returned (wrapped) for bytes that are no RESP2 reply.
var errProtocol = errors.New("protocol error")

// value is one decoded RESP2 reply or element of one.
type value struct {
	kind  byte // '+', '-', ':', '$' or '*'
	null  bool // "$-1" or "*-1"
	str   string
	num   int64
	elems []value
}

// replyReader reads RESP2 replies within [Limits]. It is not safe for
// concurrent use.
type replyReader struct {
	br     *bufio.Reader
	lim    Limits
	bytes  int // bytes the reply being read may still take
	values int // values it may still hold
}

// newReplyReader returns a reader of r with limits lim (defaults filled in).
func newReplyReader(r io.Reader, lim Limits) *replyReader {
	return &replyReader{br: bufio.NewReaderSize(r, readBuffer), lim: lim.withDefaults()}
}

// read reads one whole reply. It returns io.EOF when the connection ended
// before the reply began, and io.ErrUnexpectedEOF when inside it. After an
// error the connection is out of step and must be closed.
func (r *replyReader) read() (value, error) {
	r.bytes, r.values = r.lim.MaxReplyBytes, r.lim.MaxValues
	if _, err := r.br.Peek(1); err != nil {
		return value{}, err
	}
	return r.value(0)
}

// value reads one value at nesting depth depth.
func (r *replyReader) value(depth int) (value, error) {
	if depth > maxDepth {
		return value{}, fmt.Errorf("%w: arrays nested more than %d deep", ErrReplyTooLarge, maxDepth)
	}
	if r.values--; r.values < 0 {
		return value{}, fmt.Errorf("%w: more than %d values", ErrReplyTooLarge, r.lim.MaxValues)
	}
	line, err := r.line()
	if err != nil {
		return value{}, err
	}
	if len(line) == 0 {
		return value{}, fmt.Errorf("%w: empty line where a reply starts", errProtocol)
	}
	v := value{kind: line[0]}
	switch v.kind {
	case '+', '-':
		v.str = string(line[1:])
		return v, nil
	case ':':
		n, ok := wire.ParseInt(line[1:])
		if !ok {
			return value{}, fmt.Errorf("%w: integer reply %q", errProtocol, line)
		}
		v.num = n
		return v, nil
	case '$':
		n, ok := wire.ParseInt(line[1:])
		if !ok || n < -1 {
			return value{}, fmt.Errorf("%w: bulk length %q", errProtocol, line)
		}
		if n == -1 {
			v.null = true
			return v, nil
		}
		s, err := r.bulk(n)
		v.str = s
		return v, err
	case '*':
		n, ok := wire.ParseInt(line[1:])
		if !ok || n < -1 {
			return value{}, fmt.Errorf("%w: array length %q", errProtocol, line)
		}
		if n == -1 {
			v.null = true
			return v, nil
		}
		if n > int64(r.values) {
			return value{}, fmt.Errorf("%w: an array of %d elements with room for %d more values", ErrReplyTooLarge, n, max(r.values, 0))
		}
		v.elems = make([]value, 0, min(n, arrayChunk))
		for range n {
			e, err := r.value(depth + 1)
			if err != nil {
				return value{}, err
			}
			v.elems = append(v.elems, e)
		}
		return v, nil
	default:
		return value{}, fmt.Errorf("%w: reply type byte %q", errProtocol, line[0])
	}
}

// line reads one line ending in CRLF and returns it without them. The
// slice is valid until the next read.
func (r *replyReader) line() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull || (err == nil && len(line) > maxLine+2) {
		return nil, fmt.Errorf("%w: a line longer than %d bytes", ErrReplyTooLarge, maxLine)
	}
	if err != nil {
		return nil, noEOF(err)
	}
	if err := r.take(len(line)); err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: a line not ending in CRLF", errProtocol)
	}
	return line[:len(line)-2], nil
}

// bulk reads a bulk string's n bytes and CRLF.
func (r *replyReader) bulk(n int64) (string, error) {
	if n+2 > int64(r.bytes) {
		return "", fmt.Errorf("%w: a bulk string of %d bytes with %d left of %d", ErrReplyTooLarge, n, max(r.bytes, 0), r.lim.MaxReplyBytes)
	}
	if err := r.take(int(n) + 2); err != nil {
		return "", err
	}
	buf := make([]byte, 0, min(n, bulkChunk))
	for int64(len(buf)) < n {
		chunk := min(n-int64(len(buf)), bulkChunk)
		buf = append(buf, make([]byte, chunk)...)
		if _, err := io.ReadFull(r.br, buf[len(buf)-int(chunk):]); err != nil {
			return "", noEOF(err)
		}
	}
	var crlf [2]byte
	if _, err := io.ReadFull(r.br, crlf[:]); err != nil {
		return "", noEOF(err)
	}
	if crlf != [2]byte{'\r', '\n'} {
		return "", fmt.Errorf("%w: a bulk string not ending in CRLF", errProtocol)
	}
	return string(buf), nil
}

// take counts n more bytes of the reply against its limit.
func (r *replyReader) take(n int) error {
	if r.bytes -= n; r.bytes < 0 {
		return fmt.Errorf("%w: more than %d bytes", ErrReplyTooLarge, r.lim.MaxReplyBytes)
	}
	return nil
}

// noEOF turns the end of the connection inside a reply into
// io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// The shapes a cluster command's reply is read through. Each reports
// whether v has that shape; a caller turns a false into its own error.

// text returns a simple or bulk string's text.
func (v value) text() (string, bool) {
	if (v.kind == '+' || v.kind == '$') && !v.null {
		return v.str, true
	}
	return "", false
}

// integer returns an integer reply, or a string that is one as Redis
// writes integers.
func (v value) integer() (int64, bool) {
	if v.kind == ':' {
		return v.num, true
	}
	if s, ok := v.text(); ok {
		return wire.ParseInt([]byte(s))
	}
	return 0, false
}

// array returns an array's elements.
func (v value) array() ([]value, bool) {
	if v.kind == '*' && !v.null {
		return v.elems, true
	}
	return nil, false
}

// field is one key and value of a map written as a flat array, as RESP2
// writes CLUSTER SHARDS's maps.
type field struct {
	key string
	val value
}

// fields returns the key-value pairs of a map written as a flat array:
// an even number of elements, each key a string, no key twice.
func (v value) fields() ([]field, error) {
	elems, ok := v.array()
	if !ok || len(elems)%2 != 0 {
		return nil, errors.New("not a map (an array of keys and values)")
	}
	out := make([]field, 0, len(elems)/2)
	seen := make(map[string]bool, len(elems)/2)
	for i := 0; i < len(elems); i += 2 {
		key, ok := elems[i].text()
		if !ok {
			return nil, errors.New("a map key that is not a string")
		}
		if seen[key] {
			return nil, fmt.Errorf("map key %q given twice", quote(key))
		}
		seen[key] = true
		out = append(out, field{key: key, val: elems[i+1]})
	}
	return out, nil
}

// maxQuoted is how much of a string from the network an error quotes.
const maxQuoted = 64

// quote returns s, cut to maxQuoted bytes, for an error message (which
// prints it with %q, so that no byte of it can forge a log line).
func quote(s string) string {
	if len(s) > maxQuoted {
		return s[:maxQuoted] + "..."
	}
	return s
}
