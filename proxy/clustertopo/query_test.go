package clustertopo

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// fakeNode is a node that answers each command (its arguments joined by
// spaces) as replies says: "" for no answer at all, and an error reply for
// a command replies does not name. It records the commands it was sent.
type fakeNode struct {
	addr string
	mu   sync.Mutex
	cmds []string // guarded by mu
}

func startFakeNode(t *testing.T, replies map[string]string) *fakeNode {
	t.Helper()
	n := &fakeNode{}
	p := redistest.StartFakePrimary(t, redistest.FakeOptions{Reply: func(cmd string) (string, bool) {
		n.mu.Lock()
		n.cmds = append(n.cmds, cmd)
		n.mu.Unlock()
		if reply, ok := replies[cmd]; ok {
			return reply, true
		}
		return "-ERR the fake node does not know " + strconv.Quote(cmd) + "\r\n", true
	}})
	n.addr = p.Addr()
	return n
}

// commands returns the commands the node was sent.
func (n *fakeNode) commands() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.cmds...)
}

// closedAddr returns an address of 127.0.0.1 that nothing listens on.
func closedAddr(t *testing.T) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(redistest.FreePort(t)))
}

func TestQueryFallback(t *testing.T) {
	unknown := "-ERR unknown subcommand 'SHARDS'. Try CLUSTER HELP.\r\n"
	old := "-ERR Unknown subcommand or wrong number of arguments for 'SHARDS'. Try CLUSTER HELP.\r\n"
	noperm := "-NOPERM this user has no permissions to run the 'cluster|nodes' command\r\n"
	nodes := enc(nodesLine(idA, "127.0.0.1:7000@17000", "myself,master", "-", "0-16383"))
	slots := enc([]any{[]any{0, 16383, slotsNode("127.0.0.1", 7000, idA)}})
	tests := []struct {
		name    string
		replies map[string]string
		want    Source
		asked   []string
	}{
		{"CLUSTER SHARDS", map[string]string{"CLUSTER SHARDS": oneShard}, FromShards, []string{"CLUSTER SHARDS"}},
		{"Redis 7.0 syntax", map[string]string{"CLUSTER SHARDS": unknown, "CLUSTER NODES": nodes}, FromNodes, []string{"CLUSTER SHARDS", "CLUSTER NODES"}},
		{"Redis 6 syntax", map[string]string{"CLUSTER SHARDS": old, "CLUSTER NODES": nodes}, FromNodes, []string{"CLUSTER SHARDS", "CLUSTER NODES"}},
		{"not permitted", map[string]string{"CLUSTER SHARDS": noperm, "CLUSTER NODES": noperm, "CLUSTER SLOTS": slots}, FromSlots,
			[]string{"CLUSTER SHARDS", "CLUSTER NODES", "CLUSTER SLOTS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := startFakeNode(t, tt.replies)
			res, err := Query(t.Context(), []string{node.addr}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Topology.Source != tt.want || res.Seed != node.addr || len(res.Failed) != 0 {
				t.Errorf("Query = source %v from %s, failed %v; want %v from %s", res.Topology.Source, res.Seed, res.Failed, tt.want, node.addr)
			}
			if p, err := res.Topology.Shards[0].Primary(); err != nil || p.Addr != "127.0.0.1:7000" {
				t.Errorf("Primary() = %+v, %v", p, err)
			}
			if got := node.commands(); strings.Join(got, ",") != strings.Join(tt.asked, ",") {
				t.Errorf("the node was asked %q, want %q", got, tt.asked)
			}
		})
	}
}

// TestQuerySeeds asks seeds that each fail in one way before one that
// answers, and checks that each failure is reported and the answer used.
func TestQuerySeeds(t *testing.T) {
	closed := closedAddr(t)
	disabled := startFakeNode(t, map[string]string{"CLUSTER SHARDS": "-ERR This instance has cluster support disabled\r\n"})
	huge := startFakeNode(t, map[string]string{"CLUSTER SHARDS": enc([]any{strings.Repeat("x", 2000)})})
	broken := startFakeNode(t, map[string]string{"CLUSTER SHARDS": enc([]any{[]any{"slots", []any{0, 16384}, "nodes", []any{}}})})
	silent := startFakeNode(t, map[string]string{"CLUSTER SHARDS": ""})
	good := startFakeNode(t, map[string]string{"CLUSTER SHARDS": oneShard})
	seeds := []string{closed, disabled.addr, huge.addr, broken.addr, silent.addr, good.addr}
	start := time.Now()
	res, err := Query(t.Context(), seeds, Options{Timeout: 300 * time.Millisecond, Limits: Limits{MaxReplyBytes: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Seed != good.addr || len(res.Topology.Shards) != 1 {
		t.Errorf("answered by %s with %+v, want %s's topology", res.Seed, res.Topology, good.addr)
	}
	if len(res.Failed) != 5 {
		t.Fatalf("Failed = %v, want the 5 seeds before the good one", res.Failed)
	}
	for i, f := range res.Failed {
		if f.Seed != seeds[i] {
			t.Errorf("Failed[%d] is %s, want %s", i, f.Seed, seeds[i])
		}
	}
	if err := res.Failed[0].Err; !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("closed port: %v, want ECONNREFUSED", err)
	}
	if err := res.Failed[1].Err; !strings.Contains(err.Error(), "cluster support disabled") {
		t.Errorf("cluster disabled: %v", err)
	}
	if got := disabled.commands(); len(got) != 1 {
		t.Errorf("a node with cluster support disabled was asked %q; want CLUSTER SHARDS alone", got)
	}
	if err := res.Failed[2].Err; !errors.Is(err, ErrReplyTooLarge) {
		t.Errorf("huge reply: %v, want ErrReplyTooLarge", err)
	}
	if err := res.Failed[3].Err; !strings.Contains(err.Error(), "CLUSTER SHARDS: shard 0: slots") {
		t.Errorf("broken reply: %v", err)
	}
	if err := res.Failed[4].Err; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("silent node: %v, want context.DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Query took %v", elapsed)
	}
	if !strings.Contains(res.Failed[4].Error(), "seed "+silent.addr+": ") {
		t.Errorf("SeedError %q does not name its seed", res.Failed[4].Error())
	}
}

func TestQueryNoAnswer(t *testing.T) {
	disabled := startFakeNode(t, map[string]string{"CLUSTER SHARDS": "-ERR This instance has cluster support disabled\r\n"})
	seeds := []string{closedAddr(t), disabled.addr}
	res, err := Query(t.Context(), seeds, Options{})
	if err == nil {
		t.Fatalf("Query = %+v, want an error", res)
	}
	var se *SeedError
	if !errors.As(err, &se) || se.Seed != seeds[0] || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("error %v does not wrap each seed's", err)
	}
	if len(res.Failed) != 2 || !strings.Contains(err.Error(), disabled.addr) {
		t.Errorf("Failed = %v, error %v; want both seeds", res.Failed, err)
	}
	if _, err := Query(t.Context(), nil, Options{}); !errors.Is(err, ErrNoSeeds) {
		t.Errorf("Query with no seeds: %v, want ErrNoSeeds", err)
	}
}

func TestQueryAuth(t *testing.T) {
	node := startFakeNode(t, map[string]string{
		"AUTH secret": "+OK\r\n", "AUTH topo secret": "+OK\r\n", "AUTH wrong": "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
		"CLUSTER SHARDS": oneShard,
	})
	if _, err := Query(t.Context(), []string{node.addr}, Options{Password: "secret"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Query(t.Context(), []string{node.addr}, Options{Username: "topo", Password: "secret"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"AUTH secret", "CLUSTER SHARDS", "AUTH topo secret", "CLUSTER SHARDS"}
	if got := node.commands(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the node was sent %q, want %q", got, want)
	}
	_, err := Query(t.Context(), []string{node.addr}, Options{Password: "wrong"})
	if err == nil || !strings.Contains(err.Error(), "AUTH: error reply \"WRONGPASS") {
		t.Errorf("a refused AUTH: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "wrong") && !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("the error %q shows the password", err)
	}
}

// TestQueryCanceled checks that a canceled context ends a read under way
// at once, not at the seed's timeout.
func TestQueryCanceled(t *testing.T) {
	silent := startFakeNode(t, map[string]string{"CLUSTER SHARDS": ""})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	res, err := Query(ctx, []string{silent.addr, closedAddr(t)}, Options{Timeout: time.Minute})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Query = %+v, %v; want context.Canceled", res, err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Query returned %v after the cancel", elapsed)
	}
	if len(res.Failed) != 1 || res.Failed[0].Seed != silent.addr {
		t.Errorf("Failed = %v, want the silent seed alone (the next one never asked)", res.Failed)
	}
}

// silentTLSNode listens on 127.0.0.1 with pki's certificate, completes
// each TLS handshake, and then never answers. It stops when the test ends.
func silentTLSNode(t *testing.T, pki *redistest.PKI) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(pki.Cert, pki.Key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				io.Copy(io.Discard, conn) // handshakes, reads, answers nothing; ends when the client hangs up
			})
		}
	})
	return ln.Addr().String()
}

// TestQueryCanceledTLS cancels a query that is waiting for a reply over
// TLS: the cancel reaches the connection under the TLS one, under -race
// too.
func TestQueryCanceledTLS(t *testing.T) {
	pki := redistest.NewPKI(t)
	addr := silentTLSNode(t, pki)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := Query(ctx, []string{addr}, Options{TLS: pki.ClientConfig(), Timeout: time.Minute})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Query = %v, want context.Canceled", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Query returned %v after the cancel", elapsed)
	}
}

func TestAskRole(t *testing.T) {
	tests := []struct {
		name, reply string
		opts        Options
		want        string
		wantErr     string
	}{
		{"primary", "*3\r\n$6\r\nmaster\r\n:3129\r\n*0\r\n", Options{}, "master", ""},
		{"replica", "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n$9\r\nconnected\r\n:3129\r\n", Options{}, "slave", ""},
		{"with AUTH", "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n", Options{Username: "u", Password: "p"}, "master", ""},
		{"error reply", "-NOPERM no\r\n", Options{}, "", `ROLE: error reply "NOPERM no"`},
		{"not an array", "+master\r\n", Options{}, "", "not an array"},
		{"empty array", "*0\r\n", Options{}, "", "not an array"},
		{"long role", "*1\r\n$17\r\nmastermastermaste\r\n", Options{}, "", "does not start with a role"},
		{"role not a string", "*1\r\n:1\r\n", Options{}, "", "does not start with a role"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := startFakeNode(t, map[string]string{"ROLE": tt.reply, "AUTH u p": "+OK\r\n"})
			got, err := AskRole(t.Context(), node.addr, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("AskRole = %q, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("AskRole = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := AskRole(t.Context(), closedAddr(t), Options{}); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("AskRole of a closed port: %v, want ECONNREFUSED", err)
	}
}
