package clustertopo

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/replproxy/replproxy/proxy/wire"
)

// DefaultTimeout bounds one seed's part of a [Query] (dial, TLS handshake,
// AUTH and every reply) when [Options.Timeout] is zero.
const DefaultTimeout = 5 * time.Second

// Options configure a [Query]. The zero value dials plain TCP without AUTH,
// with [DefaultTimeout] and [DefaultLimits].
type Options struct {
	// Username and Password are sent with AUTH when Password is set
	// (AUTH <password> when Username is empty).
	Username, Password string
	// TLS, when set, makes each connection TLS with this configuration; a
	// configuration without a ServerName gets the seed's host.
	TLS *tls.Config
	// Timeout bounds each seed: from its dial to its last reply.
	Timeout time.Duration
	// Limits bound each reply.
	Limits Limits
	// Dial makes the TCP connection instead of a net.Dialer (to bind a
	// source address, say).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// SeedError is why one seed gave no topology.
type SeedError struct {
	Seed string
	Err  error
}

func (e *SeedError) Error() string { return "seed " + e.Seed + ": " + e.Err.Error() }

func (e *SeedError) Unwrap() error { return e.Err }

// Result is what a [Query] found.
type Result struct {
	// Topology is the cluster as Seed described it.
	Topology Topology
	// Seed is the seed that answered.
	Seed string
	// Failed are the seeds asked before it, in order, each with why it
	// gave no topology.
	Failed []SeedError
}

// ErrNoSeeds is returned when a [Query] is given no seed.
var ErrNoSeeds = errors.New("no seed addresses")

// question is a command a seed is asked, and the parser of its reply.
type question struct {
	source Source
	parse  func(value) (Topology, error)
}

// questions returns the commands a seed is asked, in order.
func questions() []question {
	return []question{{FromShards, parseShards}, {FromNodes, parseNodes}, {FromSlots, parseSlots}}
}

// Query asks the seeds (host:port addresses of nodes of one cluster), one
// at a time in order, for the cluster's topology, and returns the first
// one a seed gives. Each seed is dialed afresh, authenticated if
// opts.Password is set, and asked CLUSTER SHARDS; a seed that does not know
// that command or may not run it (an error reply saying unknown subcommand,
// or NOPERM) is asked CLUSTER NODES, then CLUSTER SLOTS. Any other error
// reply, a reply that breaks its limits or does not parse, a topology with
// no shard, a refused dial, or opts.Timeout passing moves on to the next
// seed. Query returns an error, wrapping each seed's, when no seed gave a
// topology, and ctx's error when ctx ends first; Result.Failed lists the
// seeds that failed either way.
//
// The topology is one node's view, which may be stale: a node cut off from
// the others still names the primary it last knew. The caller confirms a
// primary it is about to follow by asking it (ROLE).
func Query(ctx context.Context, seeds []string, opts Options) (Result, error) {
	if len(seeds) == 0 {
		return Result{}, ErrNoSeeds
	}
	var res Result
	for _, seed := range seeds {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("cluster topology: %w", err)
		}
		t, err := querySeed(ctx, seed, opts)
		if err == nil {
			res.Topology, res.Seed = t, seed
			return res, nil
		}
		res.Failed = append(res.Failed, SeedError{Seed: seed, Err: err})
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("cluster topology: %w", err)
	}
	errs := make([]error, len(res.Failed))
	for i := range res.Failed {
		errs[i] = &res.Failed[i]
	}
	return res, fmt.Errorf("cluster topology: no seed answered: %w", errors.Join(errs...))
}

// querySeed asks one seed, within opts.Timeout.
func querySeed(ctx context.Context, seed string, opts Options) (Topology, error) {
	var t Topology
	err := withNode(ctx, seed, opts, func(ask askFunc) error {
		var refused []string
		for _, q := range questions() {
			v, err := ask(strings.Fields(q.source.String())...)
			if err != nil {
				return fmt.Errorf("%s: %w", q.source, err)
			}
			if v.kind == '-' {
				refused = append(refused, fmt.Sprintf("%s: error reply %q", q.source, quote(v.str)))
				if fallBack(v.str) {
					continue
				}
				break
			}
			t, err = q.parse(v)
			return err
		}
		return errors.New(strings.Join(refused, "; "))
	})
	return t, err
}

// AskRole asks the node at addr (host:port) for its role, within opts.Timeout
// and as opts says (AUTH, TLS, limits): the first element of its ROLE
// reply, "master", "slave" or "sentinel" as Redis and Valkey name them. A
// caller about to follow a node that a topology named as a primary asks it
// first, since a topology may be stale. An error reply, or a reply that is
// not an array starting with a string of at most 16 bytes, is an error.
func AskRole(ctx context.Context, addr string, opts Options) (string, error) {
	var role string
	err := withNode(ctx, addr, opts, func(ask askFunc) error {
		v, err := ask("ROLE")
		if err != nil {
			return fmt.Errorf("ROLE: %w", err)
		}
		if v.kind == '-' {
			return fmt.Errorf("ROLE: error reply %q", quote(v.str))
		}
		elems, ok := v.array()
		if !ok || len(elems) == 0 {
			return errors.New("ROLE: the reply is not an array")
		}
		r, ok := elems[0].text()
		if !ok || len(r) > maxRole {
			return fmt.Errorf("ROLE: the reply does not start with a role (%q)", quote(r))
		}
		role = r
		return nil
	})
	return role, err
}

// maxRole is the longest role AskRole accepts ("sentinel" is the longest
// Redis has).
const maxRole = 16

// askFunc sends one command to a node and reads its reply, within the
// node's deadline and reply limits.
type askFunc func(args ...string) (value, error)

// withNode connects to addr as opts says (dial, TLS handshake, AUTH when
// opts.Password is set), within opts.Timeout, and runs f with a way to ask
// it commands; the connection is closed when f returns.
func withNode(ctx context.Context, addr string, opts Options, f func(askFunc) error) error {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dial := opts.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	tcp, err := dial(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer tcp.Close()
	deadline, _ := ctx.Deadline()
	if err := tcp.SetDeadline(deadline); err != nil {
		return fmt.Errorf("set deadline: %w", err)
	}
	// A canceled ctx ends a read or write under way: the deadline moves to
	// the past. The function runs on a goroutine of its own, once, and
	// only after ctx ends; stop keeps it from running once this returns.
	// It touches the TCP connection alone, which nothing here reassigns.
	stop := context.AfterFunc(ctx, func() { tcp.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	conn := tcp
	if opts.TLS != nil {
		conf := opts.TLS
		if conf.ServerName == "" {
			conf = conf.Clone()
			conf.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(tcp, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("TLS handshake: %w", err)
		}
		conn = tc
	}
	rd := newReplyReader(conn, opts.Limits)
	ask := func(args ...string) (value, error) {
		if _, err := conn.Write(wire.AppendCommand(nil, args...)); err != nil {
			return value{}, wrapCtx(ctx, err)
		}
		v, err := rd.read()
		return v, wrapCtx(ctx, err)
	}
	if opts.Password != "" {
		args := []string{"AUTH", opts.Password}
		if opts.Username != "" {
			args = []string{"AUTH", opts.Username, opts.Password}
		}
		v, err := ask(args...)
		if err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
		if v.kind == '-' {
			return fmt.Errorf("AUTH: error reply %q", quote(v.str))
		}
	}
	return f(ask)
}

// fallBack reports whether an error reply to one cluster command sends
// Query on to the next: the server does not know the command (Redis before
// 7.0 for CLUSTER SHARDS) or the user may not run it.
func fallBack(reply string) bool {
	return strings.HasPrefix(reply, "NOPERM") || strings.Contains(wire.Lower(reply), "unknown subcommand")
}

// wrapCtx returns err, saying why when the connection's deadline cut it
// short: ctx's error when ctx ended, context.DeadlineExceeded when the
// seed's timeout passed (the connection's deadline is ctx's, so its timer
// may fire before ctx's).
func wrapCtx(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%w)", cerr, err)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
	}
	return err
}
