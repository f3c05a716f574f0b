package redistest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/resp"
)

// DefaultTimeout bounds each network operation of a [Client] (dial, flush, one reply)
// when [DialOptions.Timeout] is zero, so that a hung server fails the test instead of
// hanging it.
const DefaultTimeout = 10 * time.Second

// DialOptions configures [DialOpts]. The zero value dials without AUTH.
type DialOptions struct {
	// Username for AUTH; empty means the default user (AUTH password).
	Username string
	// Password for AUTH; empty means no AUTH is sent.
	Password string
	// Timeout bounds the dial and each flush or reply; zero means [DefaultTimeout].
	Timeout time.Duration
	// TLS, when not nil, makes the connection TLS with this client config;
	// the handshake is part of the dial.
	TLS *tls.Config
	// Dial, when not nil, makes the TCP connection instead of net.Dialer (for a
	// server in a network namespace: [Namespace]'s DialContext).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// ReplyError is an error reply ("-ERR ...", "-LOADING ...") from the server. Unlike
// other errors from a [Client], it leaves the connection usable.
type ReplyError struct {
	Msg string // the reply without the leading '-'
}

func (e *ReplyError) Error() string { return e.Msg }

// Prefix returns the error code, the first word of the reply: "ERR", "LOADING", "NOAUTH".
func (e *ReplyError) Prefix() string {
	prefix, _, _ := strings.Cut(e.Msg, " ")
	return prefix
}

// Client is a minimal RESP2 client for tests. It is not safe for concurrent use.
//
// After a network or protocol error the connection is out of step, so the Client keeps
// that first error and returns it from every later call (like bufio.Writer).
type Client struct {
	addr    string
	timeout time.Duration
	conn    net.Conn
	bw      *bufio.Writer
	br      *bufio.Reader // shared with rd, so that receive can peek at the type byte
	rd      *resp.Reader
	buf     []byte // scratch for encoding one command
	pending int    // commands sent but not yet received
	err     error  // first network or protocol error; sticky
	closed  bool   // conn is closed (by Close or after err)
}

// Dial connects to addr with default [DialOptions] and closes the client at the end of
// the test. It fails the test if the connection cannot be made.
func Dial(t testing.TB, addr string) *Client {
	t.Helper()
	c, err := DialOpts(t, addr, DialOptions{})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return c
}

// DialIn is [Dial] from inside network namespace ns, for a server started by
// [StartServerIn] (or a proxy in that namespace).
func DialIn(t testing.TB, ns Namespace, addr string) *Client {
	t.Helper()
	c, err := DialOpts(t, addr, DialOptions{Dial: ns.DialContext})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return c
}

// DialOpts connects to addr, sends AUTH if opts.Password is set, and closes the client
// at the end of the test. Unlike [Dial] it returns errors (a *[ReplyError] for a refused
// AUTH), for tests that expect the connection to fail.
func DialOpts(t testing.TB, addr string, opts DialOptions) (*Client, error) {
	t.Helper()
	c, err := dial(addr, opts)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

// Connect is [DialOpts] without the cleanup: the caller closes the client. It
// is for goroutines that dial again and again while a test runs (a sampler
// over a deployment), which would otherwise pile up one cleanup per dial.
func Connect(addr string, opts DialOptions) (*Client, error) { return dial(addr, opts) }

// dial is [DialOpts] without the cleanup; the caller closes the client.
func dial(addr string, opts DialOptions) (*Client, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	dialTCP := opts.Dial
	if dialTCP == nil {
		dialTCP = (&net.Dialer{}).DialContext
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := dialTCP(ctx, "tcp", addr)
	if err == nil && opts.TLS != nil {
		conf := opts.TLS
		if conf.ServerName == "" {
			// As tls.DialWithDialer does: the server is named by the host dialed.
			conf = conf.Clone()
			conf.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(conn, conf)
		if err = tc.HandshakeContext(ctx); err != nil {
			conn.Close()
		}
		conn = tc
	}
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	c := &Client{
		addr:    addr,
		timeout: timeout,
		conn:    conn,
		bw:      bufio.NewWriterSize(conn, 64<<10),
		br:      br,
		// NB: resp.NewReader wraps br in bufio.NewReader, which returns br itself
		// because br is large enough, so peeking at br sees what rd reads next.
		rd: resp.NewReader(br),
	}
	if opts.Password != "" {
		args := []any{"AUTH", opts.Password}
		if opts.Username != "" {
			args = []any{"AUTH", opts.Username, opts.Password}
		}
		if _, err := c.Do(args...); err != nil {
			c.Close()
			return nil, fmt.Errorf("auth %s: %w", addr, err)
		}
	}
	return c, nil
}

// Addr returns the address the client dialed.
func (c *Client) Addr() string { return c.addr }

// Close closes the connection. It is idempotent; [Dial] and [DialOpts] also call it at
// the end of the test.
func (c *Client) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.err = fmt.Errorf("redistest: client %s: %w", c.addr, net.ErrClosed)
	return c.conn.Close()
}

// Do sends one command and returns its reply. An error reply is returned as the reply
// value and a *[ReplyError]. Do fails if replies to [Client.Send] are still pending.
//
// Arguments may be strings, []byte, integers, floats, bools or anything fmt prints.
func (c *Client) Do(args ...any) (resp.Value, error) {
	if c.pending != 0 && c.err == nil {
		return resp.Value{}, fmt.Errorf("redistest: Do with %d pipelined replies not yet received", c.pending)
	}
	if err := c.Send(args...); err != nil {
		return resp.Value{}, err
	}
	if err := c.Flush(); err != nil {
		return resp.Value{}, err
	}
	return c.Receive()
}

// MustDo is [Client.Do] that fails the test on any error, error replies included.
func (c *Client) MustDo(t testing.TB, args ...any) resp.Value {
	t.Helper()
	v, err := c.Do(args...)
	if err != nil {
		t.Fatalf("redistest: %s %s: %v", c.addr, formatArgs(args), err)
	}
	return v
}

// Send buffers one command without writing it; [Client.Flush] writes the buffer and
// [Client.Receive] reads the replies in order.
func (c *Client) Send(args ...any) error {
	if c.err != nil {
		return c.err
	}
	if len(args) == 0 {
		return errors.New("redistest: empty command")
	}
	var err error
	c.buf, err = appendCommand(c.buf[:0], args)
	if err != nil {
		return err
	}
	// bufio.Writer may write through when the buffer fills; those writes need a deadline.
	c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	if _, err := c.bw.Write(c.buf); err != nil {
		return c.fail(err)
	}
	c.pending++
	return nil
}

// Flush writes the commands buffered by [Client.Send].
func (c *Client) Flush() error {
	if c.err != nil {
		return c.err
	}
	c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	if err := c.bw.Flush(); err != nil {
		return c.fail(err)
	}
	return nil
}

// Receive reads the next reply, with the same error convention as [Client.Do]. It may
// also be called without a matching Send, to read pushed data (after SUBSCRIBE, say).
// The reply is freshly allocated and does not alias the client's buffers.
func (c *Client) Receive() (resp.Value, error) {
	if c.err != nil {
		return resp.Value{}, c.err
	}
	c.conn.SetReadDeadline(time.Now().Add(c.timeout))
	// resp.Reader treats an unknown type byte as an inline command instead of an error,
	// which would hide a broken reply; check the type byte first.
	b, err := c.br.Peek(1)
	if err != nil {
		return resp.Value{}, c.fail(err)
	}
	switch b[0] {
	case '+', '-', ':', '$', '*':
	default:
		return resp.Value{}, c.fail(fmt.Errorf("protocol error: unexpected reply type byte %q", b[0]))
	}
	v, _, err := c.rd.ReadValue()
	if err != nil {
		return resp.Value{}, c.fail(err)
	}
	if v.Type() == 0 {
		// resp v0.1.1 returns a typeless value and a nil error for arrays of more than
		// 1Mi elements, and leaves the reader in the middle of the array.
		return resp.Value{}, c.fail(errors.New("protocol error: array too long for tidwall/resp"))
	}
	if c.pending > 0 {
		c.pending--
	}
	if v.Type() == resp.Error {
		return v, &ReplyError{Msg: v.String()}
	}
	return v, nil
}

// fail records err as the sticky error and closes the connection.
func (c *Client) fail(err error) error {
	if c.err == nil {
		c.err = fmt.Errorf("redistest: client %s: %w", c.addr, err)
	}
	if !c.closed {
		c.closed = true
		c.conn.Close()
	}
	return c.err
}

// appendCommand appends args to b as a RESP array of bulk strings.
func appendCommand(b []byte, args []any) ([]byte, error) {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for i, arg := range args {
		var s string
		switch a := arg.(type) {
		case string:
			s = a
		case []byte:
			s = string(a)
		case int:
			s = strconv.Itoa(a)
		case int64:
			s = strconv.FormatInt(a, 10)
		case uint64:
			s = strconv.FormatUint(a, 10)
		case float64:
			s = strconv.FormatFloat(a, 'f', -1, 64)
		case nil:
			return b, fmt.Errorf("redistest: argument %d is nil", i)
		default:
			s = fmt.Sprint(a)
		}
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, '\r', '\n')
		b = append(b, s...)
		b = append(b, '\r', '\n')
	}
	return b, nil
}

// formatArgs renders a command for failure messages, eliding long arguments.
func formatArgs(args []any) string {
	parts := make([]string, len(args))
	for i, a := range args {
		s := fmt.Sprint(a)
		if b, ok := a.([]byte); ok {
			s = string(b)
		}
		if len(s) > 64 {
			s = s[:64] + "..."
		}
		parts[i] = strconv.Quote(s)
	}
	return strings.Join(parts, " ")
}
