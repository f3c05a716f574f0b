package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/replproxy/replproxy/internal/redistest"
)

// A hostile snapshot source: a relay in front of a real replica (R0) that
// passes its handshake, INFO and +FULLRESYNC on, and does one thing wrong
// to what it relays, so that positions and RDBs are the real ones and only
// the fault is the test's.

// A sourceFault is what a hostileSource does wrong.
type sourceFault int

const (
	faultNone      sourceFault = iota
	faultAhead                 // INFO's master_repl_offset and +FULLRESYNC's offset claimed aheadBy bytes further on
	faultJunk                  // the payload replaced by REDIS0010, 4 KiB of junk, the end opcode and a zero trailer
	faultTruncate              // half the payload, then the link closed
	faultEOFInside             // the EOF mark sent in the middle of the payload as well as at its end
	faultStall                 // half the payload, then silence (the link left open)
)

func (f sourceFault) String() string {
	return [...]string{"none", "ahead", "junk", "truncate", "eof-inside", "stall"}[f]
}

// hostileSource relays a snapshot source, with a fault. Its fault can be
// changed while it runs (set), and Payloads counts the payloads it
// relayed, faulty or not.
type hostileSource struct {
	*redistest.Relay
	fault    atomic.Int32 // a sourceFault
	aheadBy  int64
	Payloads atomic.Int32
}

// startHostileSource relays target (a real replica) with fault.
func startHostileSource(t testing.TB, target string, fault sourceFault) *hostileSource {
	t.Helper()
	h := &hostileSource{aheadBy: 1 << 30}
	h.set(fault)
	h.Relay = redistest.StartRelay(t, "127.0.0.1:0", target, h.down)
	return h
}

// set changes the fault for the links that reach their payload from now.
func (h *hostileSource) set(f sourceFault) { h.fault.Store(int32(f)) }

func (h *hostileSource) get() sourceFault { return sourceFault(h.fault.Load()) }

var infoOffset = regexp.MustCompile(`master_repl_offset:(\d+)`)

// down relays the source's direction of one link: reply lines and bulks
// as they come (the INFO and +FULLRESYNC rewritten under faultAhead), then
// the payload whole, with the fault applied.
func (h *hostileSource) down(_ int, dst io.Writer, src io.Reader) (fault bool) {
	br := bufio.NewReader(src)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return false
		}
		switch {
		case strings.HasPrefix(line, "$"): // a bulk reply: INFO's
			n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
			if err != nil || n < 0 {
				return false
			}
			body := make([]byte, n+2)
			if _, err := io.ReadFull(br, body); err != nil {
				return false
			}
			if h.get() == faultAhead {
				body = infoOffset.ReplaceAllFunc(body, func(m []byte) []byte {
					off, _ := strconv.ParseInt(string(infoOffset.FindSubmatch(m)[1]), 10, 64)
					return []byte("master_repl_offset:" + strconv.FormatInt(off+h.aheadBy, 10))
				})
				line = "$" + strconv.Itoa(len(body)-2) + "\r\n"
			}
			if _, err := io.WriteString(dst, line+string(body)); err != nil {
				return false
			}
		case strings.HasPrefix(line, "+FULLRESYNC "):
			f := strings.Fields(line)
			if h.get() == faultAhead && len(f) == 3 {
				off, _ := strconv.ParseInt(f[2], 10, 64)
				line = fmt.Sprintf("+FULLRESYNC %s %d\r\n", f[1], off+h.aheadBy)
			}
			if _, err := io.WriteString(dst, line); err != nil {
				return false
			}
			return h.payload(dst, br)
		default:
			if _, err := io.WriteString(dst, line); err != nil {
				return false
			}
		}
	}
}

// payload relays the payload after +FULLRESYNC: the keepalive newlines
// before it, its header, and its bytes with the fault applied.
func (h *hostileSource) payload(dst io.Writer, br *bufio.Reader) (fault bool) {
	var header string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return false
		}
		if line != "\n" {
			header = line
			break
		}
		if _, err := io.WriteString(dst, line); err != nil {
			return false
		}
	}
	var rdb, mark []byte
	if m, ok := strings.CutPrefix(strings.TrimRight(header, "\r\n"), "$EOF:"); ok {
		mark = []byte(m)
		for !bytes.HasSuffix(rdb, mark) {
			b, err := br.ReadByte()
			if err != nil {
				return false
			}
			rdb = append(rdb, b)
		}
		rdb = rdb[:len(rdb)-len(mark)]
	} else {
		n, err := strconv.Atoi(strings.TrimSpace(header[1:]))
		if err != nil || n < 0 {
			return false
		}
		rdb = make([]byte, n)
		if _, err := io.ReadFull(br, rdb); err != nil {
			return false
		}
	}
	h.Payloads.Add(1)
	frame := func(body []byte) []byte {
		if mark != nil {
			return append(append([]byte("$EOF:"+string(mark)+"\r\n"), body...), mark...)
		}
		return append([]byte("$"+strconv.Itoa(len(body))+"\r\n"), body...)
	}
	half := len(rdb) / 2
	var out []byte
	switch f := h.get(); f {
	case faultNone, faultAhead:
		out = frame(rdb)
	case faultJunk:
		out = frame(redistest.JunkRDB())
	case faultTruncate, faultStall:
		out = frame(rdb)[:len(header)+half]
	case faultEOFInside:
		if mark == nil {
			out = frame(redistest.JunkRDB())
			break
		}
		body := append(append(append([]byte{}, rdb[:half]...), mark...), rdb[half:]...)
		out = frame(body)
	}
	if _, err := dst.Write(out); err != nil {
		return false
	}
	f := h.get()
	if f == faultTruncate {
		return true
	}
	io.Copy(io.Discard, br) // a stall says nothing more; a good payload's link ends when the proxy hangs up
	return f != faultNone && f != faultAhead
}
