package upstream

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replid"
)

// Replies as a primary sends them (the proxy package's link tests use the same).
const (
	linkReplID    = "3e6f7fa1b2ac2025fc6edcca60effe8ade398925"
	linkReplIDNew = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"
	linkEOFMark   = "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c" // 40 random hex characters
)

// hostileDotsReplID is a replid that would name a file outside dir.
var hostileDotsReplID = strings.Repeat("../", 13) + "x"

// TestParseHandshakeReplies: the parsers accept what Redis sends and refuse,
// with ErrBadReply, anything else: replids that are not 40 lowercase hex
// digits, offsets out of [0, 2^62], payload lengths out of [0, 2^50], EOF
// marks of any length but 40.
func TestParseHandshakeReplies(t *testing.T) {
	t.Run("FULLRESYNC", func(t *testing.T) {
		for _, tc := range []struct {
			line   string
			ok     bool
			offset int64
		}{
			{"+FULLRESYNC " + linkReplID + " 0", true, 0},
			{"+FULLRESYNC " + linkReplID + " 1000", true, 1000},
			{"+FULLRESYNC " + linkReplID + " 4611686018427387904", true, replid.MaxOffset},
			{"+FULLRESYNC " + linkReplID + " 4611686018427387905", false, 0},
			{"+FULLRESYNC " + linkReplID + " 9223372036854775807", false, 0},
			{"+FULLRESYNC " + linkReplID + " 99999999999999999999", false, 0},
			{"+FULLRESYNC " + linkReplID + " -1", false, 0},
			{"+FULLRESYNC " + linkReplID + " +5", false, 0},
			{"+FULLRESYNC " + linkReplID + " 0x10", false, 0},
			{"+FULLRESYNC " + linkReplID + " ", false, 0},
			{"+FULLRESYNC " + linkReplID + " 1 2", false, 0},
			{"+FULLRESYNC " + hostileDotsReplID + " 0", false, 0},
			{"+FULLRESYNC " + strings.ToUpper(linkReplID) + " 0", false, 0},
			{"+FULLRESYNC " + linkReplID[:39] + " 0", false, 0},
			{"+FULLRESYNC " + linkReplID + "0 0", false, 0},
			{"+FULLRESYNC " + linkReplID[:39] + "g 0", false, 0},
			{"+CONTINUE " + linkReplID, false, 0},
			{"", false, 0},
		} {
			id, off, err := parseFullResync(tc.line)
			switch {
			case tc.ok && (err != nil || id != linkReplID || off != tc.offset):
				t.Errorf("parseFullResync(%q) = (%q, %d, %v), want (%q, %d, nil)", tc.line, id, off, err, linkReplID, tc.offset)
			case !tc.ok && !errors.Is(err, ErrBadReply):
				t.Errorf("parseFullResync(%q) = (%q, %d, %v), want ErrBadReply", tc.line, id, off, err)
			}
		}
	})
	t.Run("CONTINUE", func(t *testing.T) {
		for _, tc := range []struct {
			line, id string
			ok       bool
		}{
			{"+CONTINUE", "", true},
			{"+CONTINUE " + linkReplID, linkReplID, true},
			{"+CONTINUE " + hostileDotsReplID, "", false},
			{"+CONTINUE " + strings.ToUpper(linkReplID), "", false},
			{"+CONTINUE " + linkReplID[:39], "", false},
			{"+CONTINUE " + linkReplID + " 5", "", false},
			{"+FULLRESYNC", "", false},
		} {
			id, err := parseContinue(tc.line)
			switch {
			case tc.ok && (err != nil || id != tc.id):
				t.Errorf("parseContinue(%q) = (%q, %v), want (%q, nil)", tc.line, id, err, tc.id)
			case !tc.ok && !errors.Is(err, ErrBadReply):
				t.Errorf("parseContinue(%q) = (%q, %v), want ErrBadReply", tc.line, id, err)
			}
		}
	})
	t.Run("payload header", func(t *testing.T) {
		for _, tc := range []struct {
			line string
			ok   bool
			size int64
		}{
			{"$0", true, 0},
			{"$236", true, 236},
			{"$1125899906842624", true, maxPayloadSize},
			{"$EOF:" + linkEOFMark, true, -1},
			{"$1125899906842625", false, 0},
			{"$9223372036854775807", false, 0},
			{"$-1", false, 0},
			{"$+1", false, 0},
			{"$", false, 0},
			{"$ 1", false, 0},
			{"$EOF:" + linkEOFMark[:39], false, 0},
			{"$EOF:" + linkEOFMark + "x", false, 0},
			{"$EOF:", false, 0},
			{"*1", false, 0},
			{"", false, 0},
		} {
			size, mark, err := ParsePayloadHeader(tc.line)
			switch {
			case tc.ok && (err != nil || size != tc.size || (size < 0) != (string(mark) == linkEOFMark)):
				t.Errorf("ParsePayloadHeader(%q) = (%d, %q, %v), want (%d, ...)", tc.line, size, mark, err, tc.size)
			case !tc.ok && !errors.Is(err, ErrBadReply):
				t.Errorf("ParsePayloadHeader(%q) = (%d, %q, %v), want ErrBadReply", tc.line, size, mark, err)
			}
		}
	})
}

// FuzzHandshakeReplies feeds arbitrary bytes from a primary, cut into reply
// lines as the link reads them, to the parsers of +FULLRESYNC, +CONTINUE and
// payload headers. None may panic, and whatever one accepts must be safe to
// use: a replid of 40 lowercase hex digits, an offset in [0, 2^62], a
// payload length in [0, 2^50] or an EOF mark of exactly 40 bytes. What is
// accepted must also come back the same when written as Redis writes it.
func FuzzHandshakeReplies(f *testing.F) {
	for _, seed := range []string{
		"+FULLRESYNC " + linkReplID + " 1000\r\n$236\r\n",
		"\n\n+FULLRESYNC " + linkReplID + " 0\r\n$EOF:" + linkEOFMark + "\r\n",
		"+CONTINUE\r\n+CONTINUE " + linkReplIDNew + "\r\n",
		"+FULLRESYNC " + hostileDotsReplID + " 9223372036854775807\r\n",
		"+FULLRESYNC " + linkReplID + " 4611686018427387905\r\n$1125899906842625\r\n",
		"+FULLRESYNC " + linkReplID + " +5\r\n$-1\r\n$EOF:short\r\n$\r\n",
		"+CONTINUE 3E6F7FA1B2AC2025FC6EDCCA60EFFE8ADE398925\r\n",
		"-NOMASTERLINK Can't SYNC while not connected with my master\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		rd := wire.NewCommandReader(bytes.NewReader(input), wire.Limits{})
		for {
			b, err := rd.ReadReplyLine(replyLineMax)
			if err != nil {
				return
			}
			line := string(b)
			if id, off, err := parseFullResync(line); err == nil {
				if !replid.Valid(id) || off < 0 || off > replid.MaxOffset {
					t.Fatalf("parseFullResync(%q) accepted (%q, %d)", line, id, off)
				}
				again := "+FULLRESYNC " + id + " " + strconv.FormatInt(off, 10)
				if id2, off2, err := parseFullResync(again); err != nil || id2 != id || off2 != off {
					t.Fatalf("parseFullResync(%q) = (%q, %d, %v), want (%q, %d)", again, id2, off2, err, id, off)
				}
			}
			if id, err := parseContinue(line); err == nil {
				if id != "" && !replid.Valid(id) {
					t.Fatalf("parseContinue(%q) accepted %q", line, id)
				}
				again := "+CONTINUE"
				if id != "" {
					again += " " + id
				}
				if id2, err := parseContinue(again); err != nil || id2 != id {
					t.Fatalf("parseContinue(%q) = (%q, %v), want %q", again, id2, err, id)
				}
			}
			if size, mark, err := ParsePayloadHeader(line); err == nil {
				var again string
				switch {
				case mark == nil && size >= 0 && size <= maxPayloadSize:
					again = "$" + strconv.FormatInt(size, 10)
				case mark != nil && size == -1 && len(mark) == eofMarkLen:
					again = "$EOF:" + string(mark)
				default:
					t.Fatalf("ParsePayloadHeader(%q) accepted (%d, %q)", line, size, mark)
				}
				if size2, mark2, err := ParsePayloadHeader(again); err != nil || size2 != size || !bytes.Equal(mark2, mark) {
					t.Fatalf("ParsePayloadHeader(%q) = (%d, %q, %v), want (%d, %q)", again, size2, mark2, err, size, mark)
				}
			}
		}
	})
}

// TestDialBindSource: with Target.BindSource (bind-source-addr) the primary
// sees the connection come from that address, over TCP and over TLS, a
// host name resolved at the dial; without it the kernel chooses. A source
// that is not this host's, or does not resolve, fails the dial (wrapping
// the cause) rather than falling back to the kernel's choice. The whole of
// 127.0.0.0/8 is local on Linux, so 127.0.0.2 and 127.0.0.3 can be bound.
func TestDialBindSource(t *testing.T) {
	pki := redistest.NewPKI(t)
	cert, err := tls.LoadX509KeyPair(pki.Cert, pki.Key)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, source string
		tls          bool
		want         string // the address the primary sees; "" when the dial fails
		err          func(error) bool
	}{
		{name: "TCP", source: "127.0.0.2", want: "127.0.0.2"},
		{name: "TLS", source: "127.0.0.3", tls: true, want: "127.0.0.3"},
		{name: "host name", source: "localhost", want: "127.0.0.1"},
		{name: "kernel chooses", source: "", want: "127.0.0.1"},
		{name: "not this host's", source: "192.0.2.1", err: func(err error) bool { return errors.Is(err, syscall.EADDRNOTAVAIL) }},
		// A label over 63 bytes: no such host, found without asking a DNS server.
		{name: "does not resolve", source: strings.Repeat("x", 64) + ".invalid", err: func(err error) bool {
			var dnsErr *net.DNSError
			return errors.As(err, &dnsErr) && strings.Contains(err.Error(), "bind-source-addr")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			target := Target{Addr: ln.Addr().String(), Timeout: 5 * time.Second, BindSource: tc.source}
			if tc.tls {
				ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}})
				target.TLS = pki.ClientConfig()
			}
			from := make(chan string, 1)
			done := make(chan struct{})
			go func() {
				defer close(done)
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				if tc.tls { // the dial returns once the handshake is done
					c.SetDeadline(time.Now().Add(5 * time.Second))
					if err := c.(*tls.Conn).Handshake(); err != nil {
						t.Errorf("TLS handshake: %v", err)
					}
				}
				from <- c.RemoteAddr().(*net.TCPAddr).IP.String()
				c.Read(make([]byte, 1)) // until the dialler hangs up
			}()
			defer func() { ln.Close(); <-done }() // after conn.Close, which ends the Read
			conn, err := dial(t.Context(), target)
			if tc.err != nil {
				if err == nil {
					conn.Close()
					t.Fatalf("dial from %q succeeded, want it to fail", tc.source)
				}
				if !tc.err(err) {
					t.Fatalf("dial from %q: %v (%T), not the cause wanted", tc.source, err, errors.Unwrap(err))
				}
				return
			}
			if err != nil {
				t.Fatalf("dial from %q: %v", tc.source, err)
			}
			defer conn.Close()
			if got := <-from; got != tc.want {
				t.Fatalf("the primary sees the link from %s, want %s", got, tc.want)
			}
			if tc.tls {
				if _, ok := conn.(*tls.Conn); !ok {
					t.Fatalf("dial returned a %T, want a *tls.Conn", conn)
				}
			}
		})
	}
}
