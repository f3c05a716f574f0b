package upstream

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
)

// filterPrimary is a fake primary that serves side links as a primary
// does a filtered fetch: filterReply to REPLCONF rdb-filter-only (the
// handshake's other commands get +OK), and +FULLRESYNC and payload to
// PSYNC. It returns the primary and the filters it was sent.
func filterPrimary(t *testing.T, filterReply, payload string) (*redistest.FakePrimary, <-chan string) {
	t.Helper()
	filters := make(chan string, 1)
	p := redistest.StartFakePrimary(t, redistest.FakeOptions{
		Reply: func(cmd string) (string, bool) {
			filter, ok := strings.CutPrefix(cmd, "REPLCONF rdb-filter-only ")
			if !ok {
				return "", false
			}
			select {
			case filters <- filter:
			default: // a second fetch: the test fails on the first one
			}
			return filterReply + "\r\n", true
		},
		Side: func(l *redistest.FakeLink) error {
			if err := l.Write(l.FullResync() + payload); err != nil {
				return err
			}
			l.AwaitHangup()
			return nil
		},
	})
	return p, filters
}

// TestFetchFiltered: a filtered fetch sends the filter as the replica sent
// it and returns the primary's RDB, checked; a primary that refuses the
// filter (Redis before 7.0) is a *wire.RefusedError with its reply; a payload
// over the limit is refused.
func TestFetchFiltered(t *testing.T) {
	rdb := testRDB(t)
	sized := "$" + strconv.Itoa(len(rdb)) + "\r\n" + string(rdb)
	mark := strings.Repeat("m", 40)
	for _, tc := range []struct {
		name, filterReply, payload string
		limit                      int64
		refused                    string // the wire.RefusedError's reply, or ""
		fails                      bool
	}{
		{name: "sized", filterReply: "+OK", payload: sized, limit: 1 << 20},
		{name: "EOF-marked", filterReply: "+OK", payload: "$EOF:" + mark + "\r\n" + string(rdb) + mark, limit: 1 << 20},
		{name: "filter refused", filterReply: "-ERR Unrecognized REPLCONF option: rdb-filter-only", refused: "-ERR Unrecognized REPLCONF option: rdb-filter-only"},
		{name: "over the limit", filterReply: "+OK", payload: sized, limit: 10, fails: true},
		{name: "EOF-marked over the limit", filterReply: "+OK", payload: "$EOF:" + mark + "\r\n" + string(rdb) + mark, limit: 10, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, filters := filterPrimary(t, tc.filterReply, tc.payload)
			l, _ := newTestLink(t, Target{Addr: p.Addr(), Timeout: 10 * time.Second}, Options{})
			sn, err := l.FetchFiltered(t.Context(), "", "functions", tc.limit)
			select {
			case got := <-filters:
				if got != "functions" {
					t.Fatalf("the primary was sent filter %q", got)
				}
			default:
				t.Fatalf("the primary was sent no filter (%v)", err)
			}
			var refused *wire.RefusedError
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
				if sn.State() != replbuf.SnapshotComplete || sn.Size() != int64(len(rdb)) || sn.Offset() != redistest.FakeOffset {
					t.Fatalf("snapshot %s of %d bytes at %d, want the complete RDB at %d", sn.State(), sn.Size(), sn.Offset(), redistest.FakeOffset)
				}
			}
		})
	}
}

// TestFetchBindSource: a side link, to the primary or to a snapshot-from
// source, is made from the Target's BindSource as the main link is: fetch
// derives the source's Target from the primary's.
func TestFetchBindSource(t *testing.T) {
	rdb := testRDB(t)
	fetchFrom := func() (*redistest.FakePrimary, <-chan string) {
		from := make(chan string, 1)
		p := redistest.StartFakePrimary(t, redistest.FakeOptions{RDB: rdb, Side: func(l *redistest.FakeLink) error {
			select {
			case from <- l.Conn().RemoteAddr().(*net.TCPAddr).IP.String():
			case <-l.Primary().Done(): // a second fetch: the test fails on the first
				return nil
			}
			return l.GoodFetch()
		}})
		return p, from
	}
	primary, primaryFrom := fetchFrom()
	source, sourceFrom := fetchFrom()
	l, _ := newTestLink(t, Target{Addr: primary.Addr(), Timeout: 10 * time.Second, BindSource: "127.0.0.2"}, Options{})
	for _, tc := range []struct {
		name, from string
		seen       <-chan string
	}{
		{"primary", "", primaryFrom},
		{"snapshot-from source", source.Addr(), sourceFrom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sn, err := l.FetchSnapshot(t.Context(), tc.from, nil, func(*replbuf.Snapshot, int64) (PayloadSink, error) { return nil, nil })
			if err != nil {
				t.Fatal(err)
			}
			sn.Release()
			if got := <-tc.seen; got != "127.0.0.2" {
				t.Fatalf("the side link came from %s, want 127.0.0.2 (bind-source-addr)", got)
			}
		})
	}
}
