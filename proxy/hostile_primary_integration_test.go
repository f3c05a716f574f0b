package proxy

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// TestCorruptPayloadFromPrimary: a primary whose full sync payload is junk
// under a zero checksum (what rdbchecksum no writes), sized and then
// EOF-marked, before it sends a good one. The RDB check refuses both: no
// replica of the proxy exits or loads anything, neither is kept in dir,
// each is counted, the link asks again with backoff, and the good payload
// then reaches every replica; a replica restarted after gets it from dir.
func TestCorruptPayloadFromPrimary(t *testing.T) {
	junk := string(redistest.JunkRDB())
	h := startFakePrimary(t, func(hc *fakeLink) error {
		switch hc.n {
		case 1:
			if err := hc.write(hc.fullResync() + "$" + strconv.Itoa(len(junk)) + "\r\n" + junk); err != nil {
				return err
			}
		case 2:
			if err := hc.write(hc.fullResync() + "$EOF:" + linkEOFMark + "\r\n" + junk + linkEOFMark); err != nil {
				return err
			}
		default:
			return fakeGoodMain(0)(hc)
		}
		hc.awaitHangup()
		return nil
	}, nil)
	p := startProxy(t, append(h.replicaOf(), "--repl-timeout", "1")...)
	xc := redistest.Dial(t, p.AddrString())
	srvs, rcs := startLoadingReplicas(t, xc.Addr())
	waitLinkUp(t, xc)
	for i, c := range rcs {
		redistest.WaitFor(t, 20*time.Second, "replica synced from the good payload", func() bool {
			return c.Info(t, "replication")["master_link_status"] == "up"
		})
		replicaSurvived(t, srvs[i], c)
		if n := totalKeys(t, c); n != 3 {
			t.Errorf("replica %d holds %d keys, want the 3 of the good payload", i, n)
		}
	}
	if n := xc.InfoInt(t, "proxy", "upstream_rdb_check_failures"); n != 2 {
		t.Errorf("upstream_rdb_check_failures %d, want 2", n)
	}
	if n := xc.InfoInt(t, "proxy", "upstream_checksum_failures"); n != 0 {
		t.Errorf("upstream_checksum_failures %d for payloads with no checksum", n)
	}
	notJunkInDir(t, xc)
	srvs[0].Restart()
	rc := redistest.Dial(t, srvs[0].Addr())
	redistest.WaitFor(t, 20*time.Second, "restarted replica synced", func() bool {
		return rc.Info(t, "replication")["master_link_status"] == "up"
	})
	replicaSurvived(t, srvs[0], rc)
	if n := totalKeys(t, rc); n != 3 {
		t.Errorf("restarted replica holds %d keys, want 3", n)
	}
}

// TestFetchedPayloadRefusedAtItsEnd: a fetched payload whose structure is
// sound but whose checksum does not match is followed by a replica loading
// from the socket as it arrives, which must never have its end: the proxy
// holds the end opcode and the checksum back until the check has passed
// them, and cuts the replica when it fails. The replica does not exit
// (a cut link is a connection error to it, not a corrupt RDB), comes back,
// and loads the next, good payload.
func TestFetchedPayloadRefusedAtItsEnd(t *testing.T) {
	h := startFakePrimary(t, fakeGoodMain(0), func(hc *fakeLink) error {
		rdb := []byte(string(hc.primary.rdb))
		if hc.n == 1 {
			rdb[len(rdb)-1] ^= 0x01 // the last byte of the CRC64 trailer
		}
		if err := hc.write(hc.fullResync() + "$EOF:" + linkEOFMark + "\r\n" + string(rdb)); err != nil {
			return err
		}
		// A primary slow to end its payload: what the proxy publishes of
		// it meanwhile reaches the replica, which parses it as it comes.
		time.Sleep(300 * time.Millisecond)
		if err := hc.write(linkEOFMark); err != nil {
			return err
		}
		hc.awaitHangup()
		return nil
	})
	// No stream log: a fetched EOF-marked payload is followed as it
	// arrives ("$EOF:" to the replica) rather than sent from dir once whole.
	p := startProxy(t, append(h.replicaOf(), "--repl-timeout", "1", "--repl-log-size", "0")...)
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	p.hist.Retire(p.hist.Newest(), false) // no servable snapshot: a full sync fetches one
	host, port, _ := strings.Cut(xc.Addr(), ":")
	srv := redistest.StartServer(t, "--replicaof", host, port, "--repl-diskless-load", "swapdb")
	rc := redistest.Dial(t, srv.Addr())
	redistest.WaitFor(t, 20*time.Second, "replica synced from the second fetch", func() bool {
		return rc.Info(t, "replication")["master_link_status"] == "up"
	})
	replicaSurvived(t, srv, rc)
	if n := totalKeys(t, rc); n != 3 {
		t.Errorf("replica holds %d keys, want the 3 of the good payload", n)
	}
	if n := h.sides.Load(); n < 2 {
		t.Errorf("%d fetches, want the refused one and the good one", n)
	}
	if n := xc.InfoInt(t, "proxy", "upstream_checksum_failures"); n != 1 {
		t.Errorf("upstream_checksum_failures %d, want 1", n)
	}
}

// totalKeys is the number of keys c's server holds in all its DBs (INFO
// keyspace): the fake primary's dataset has keys in DB 0 and DB 3.
func totalKeys(t *testing.T, c *redistest.Client) int64 {
	t.Helper()
	n := int64(0)
	for _, v := range c.Info(t, "keyspace") {
		keys, _, _ := strings.Cut(strings.TrimPrefix(v, "keys="), ",")
		k, err := strconv.ParseInt(keys, 10, 64)
		if err != nil {
			t.Fatalf("INFO keyspace: %q", v)
		}
		n += k
	}
	return n
}
