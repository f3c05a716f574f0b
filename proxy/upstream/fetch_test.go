package upstream

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
)

// timedHost is a testHost naming a primary at addr, with a timeout.
type timedHost struct {
	*testHost
	addr string
}

func (h *timedHost) Target() Target { return Target{Addr: h.addr, Timeout: 10 * time.Second} }

// filterPrimary serves one side link as a primary does a filtered fetch:
// +OK to the handshake and to REPLCONF rdb-only, then filterReply to
// REPLCONF rdb-filter-only, and, if that was +OK, +FULLRESYNC and payload
// to PSYNC. It returns the listener's address and the filters it was sent.
func filterPrimary(t *testing.T, filterReply, payload string) (string, <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	filters := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		rd := wire.NewCommandReader(conn, wire.Limits{})
		for {
			cmd, err := rd.ReadCommand()
			if err != nil {
				return
			}
			var reply string
			switch name := strings.ToLower(string(cmd.Args[0])); {
			case name == "ping":
				reply = "+PONG\r\n"
			case name == "replconf" && string(cmd.Args[1]) == "rdb-filter-only":
				filters <- string(cmd.Args[2])
				reply = filterReply + "\r\n"
			case name == "replconf":
				reply = "+OK\r\n"
			case name == "psync":
				reply = "+FULLRESYNC " + strings.Repeat("a", 40) + " 5\r\n" + payload
			}
			if _, err := conn.Write([]byte(reply)); err != nil {
				return
			}
		}
	}()
	return ln.Addr().String(), filters
}

// TestFetchFiltered: a filtered fetch sends the filter as the replica sent
// it and returns the primary's RDB, checked; a primary that refuses the
// filter (Redis before 7.0) is a *RefusedError with its reply; a payload
// over the limit is refused.
func TestFetchFiltered(t *testing.T) {
	rdb, err := os.ReadFile("../../testdata/rdb/small.rdb")
	if err != nil {
		t.Fatal(err)
	}
	sized := "$" + strconv.Itoa(len(rdb)) + "\r\n" + string(rdb)
	mark := strings.Repeat("m", 40)
	for _, tc := range []struct {
		name, filterReply, payload string
		limit                      int64
		refused                    string // the RefusedError's reply, or ""
		fails                      bool
	}{
		{name: "sized", filterReply: "+OK", payload: sized, limit: 1 << 20},
		{name: "EOF-marked", filterReply: "+OK", payload: "$EOF:" + mark + "\r\n" + string(rdb) + mark, limit: 1 << 20},
		{name: "filter refused", filterReply: "-ERR Unrecognized REPLCONF option: rdb-filter-only", refused: "-ERR Unrecognized REPLCONF option: rdb-filter-only"},
		{name: "over the limit", filterReply: "+OK", payload: sized, limit: 10, fails: true},
		{name: "EOF-marked over the limit", filterReply: "+OK", payload: "$EOF:" + mark + "\r\n" + string(rdb) + mark, limit: 10, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, filters := filterPrimary(t, tc.filterReply, tc.payload)
			h := &timedHost{testHost: &testHost{st: replbuf.NewStream(0, &replbuf.Config{})}, addr: addr}
			t.Cleanup(func() { h.st.Close(nil) })
			base, _ := newTestLink(t) // for its counters
			l := New(h, Options{Pool: replbuf.NewPool(0), Counters: base.counters})
			sn, err := l.FetchFiltered(t.Context(), "functions", tc.limit)
			select {
			case got := <-filters:
				if got != "functions" {
					t.Fatalf("the primary was sent filter %q", got)
				}
			default:
				t.Fatalf("the primary was sent no filter (%v)", err)
			}
			var refused *RefusedError
			switch {
			case tc.refused != "":
				if !errors.As(err, &refused) || refused.Reply != tc.refused {
					t.Fatalf("FetchFiltered = %v, want the primary's refusal", err)
				}
			case tc.fails:
				if err == nil {
					sn.Release()
					t.Fatal("a payload over the limit was taken")
				}
			case err != nil:
				t.Fatal(err)
			default:
				defer sn.Release()
				if sn.State() != replbuf.SnapshotComplete || sn.Size() != int64(len(rdb)) || sn.Offset() != 5 {
					t.Fatalf("snapshot %s of %d bytes at %d, want the complete RDB at 5", sn.State(), sn.Size(), sn.Offset())
				}
			}
		})
	}
}
