package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/rdbcheck"
	"github.com/replproxy/replproxy/replbuf"
)

// TestUpstreamFollowsPrimary: a primary holding 10k keys, the proxy started
// with --replicaof, in both of the primary's sync modes. The link comes up,
// the primary sees one replica, the proxy's offset equals the primary's after
// writes, WAIT counts the proxy, and the snapshot is the RDB the primary sent,
// its CRC64 checked.
func TestUpstreamFollowsPrimary(t *testing.T) {
	for _, diskless := range []string{"yes", "no"} {
		t.Run("repl-diskless-sync="+diskless, func(t *testing.T) {
			primary, pc := startPrimary(t, "--repl-diskless-sync", diskless)
			pc.MustDo(t, "DEBUG", "POPULATE", 10000, "key", 64)
			// The snapshot stays in memory only without the stream log
			// (package snapshots, persist.go).
			p, xc := startProxyOf(t, primary, "--repl-log-size", "0")
			if n := pc.InfoInt(t, "replication", "connected_slaves"); n != 1 {
				t.Fatalf("primary has %d replicas, want 1", n)
			}
			writeMixed(t, pc, 2000)
			off := waitOffsetsEqual(t, pc, xc)
			if got := xc.InfoInt(t, "replication", "master_repl_offset"); got != off {
				t.Fatalf("proxy offset %d, primary %d", got, off)
			}
			// WAIT makes the primary send GETACK; the proxy answers it.
			pc.MustDo(t, "SET", "after", "sync")
			if n, err := pc.Do("WAIT", 1, 2000); err != nil || n.Integer() != 1 {
				t.Fatalf("WAIT 1 2000 = %v, %v; want 1", n, err)
			}

			sn := p.Snapshot()
			if sn == nil || sn.State() != replbuf.SnapshotComplete {
				t.Fatalf("no complete snapshot: %v", sn)
			}
			rdb := readSnapshot(t, sn)
			checkRDBTrailer(t, rdb)
			if diskless == "no" {
				// The primary sent its dump file: the snapshot is that file.
				file, err := os.ReadFile(filepath.Join(primary.Dir(), "dump.rdb"))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(rdb, file) {
					t.Fatalf("snapshot (%d bytes) differs from the primary's dump.rdb (%d bytes)", len(rdb), len(file))
				}
			} else {
				// Diskless: the payload was the RDB plus the 40-byte EOF mark.
				if got := xc.InfoInt(t, "proxy", "upstream_rdb_bytes"); got != int64(len(rdb))+40 {
					t.Fatalf("received %d payload bytes for a %d-byte RDB", got, len(rdb))
				}
			}
			if got := xc.InfoInt(t, "proxy", "snapshot_size"); got != int64(len(rdb)) {
				t.Fatalf("INFO snapshot_size %d, snapshot %d bytes", got, len(rdb))
			}
			if sn.Offset() != xc.InfoInt(t, "proxy", "snapshot_offset") {
				t.Fatal("INFO snapshot_offset differs")
			}
		})
	}
}

// TestUpstreamPartialResyncAfterKill: CLIENT KILL TYPE replica on the primary;
// the proxy comes back by partial resync.
func TestUpstreamPartialResyncAfterKill(t *testing.T) {
	primary, pc := startPrimary(t)
	_, xc := startProxyOf(t, primary)
	writeMixed(t, pc, 500)
	waitOffsetsEqual(t, pc, xc)
	full := pc.InfoInt(t, "stats", "sync_full")
	partial := pc.InfoInt(t, "stats", "sync_partial_ok")
	gen := xc.InfoInt(t, "proxy", "stream_generation")

	pc.MustDo(t, "CLIENT", "KILL", "TYPE", "replica")
	writeMixed(t, pc, 500) // written while the link may be down: the backlog covers it
	redistest.WaitFor(t, 10*time.Second, "partial resync", func() bool {
		return pc.InfoInt(t, "stats", "sync_partial_ok") == partial+1
	})
	waitLinkUp(t, xc)
	writeMixed(t, pc, 100)
	waitOffsetsEqual(t, pc, xc)
	if got := pc.InfoInt(t, "stats", "sync_full"); got != full {
		t.Fatalf("primary sync_full went from %d to %d", full, got)
	}
	if got := xc.InfoInt(t, "proxy", "stream_generation"); got != gen {
		t.Fatalf("stream generation went from %d to %d on a partial resync", gen, got)
	}
	if n, err := pc.Do("WAIT", 1, 2000); err != nil || n.Integer() != 1 {
		t.Fatalf("WAIT after the partial resync = %v, %v", n, err)
	}
}

// TestUpstreamPrimaryRestart: a restarted primary has a new replication ID;
// the proxy full-syncs and starts a new generation.
func TestUpstreamPrimaryRestart(t *testing.T) {
	primary, pc := startPrimary(t)
	_, xc := startProxyOf(t, primary)
	writeMixed(t, pc, 200)
	waitOffsetsEqual(t, pc, xc)
	oldID := xc.Info(t, "replication")["master_replid"]
	gen := xc.InfoInt(t, "proxy", "stream_generation")
	fulls := xc.InfoInt(t, "proxy", "upstream_full_syncs")

	primary.Restart()
	pc = redistest.Dial(t, primary.Addr())
	newID := pc.Info(t, "replication")["master_replid"]
	if newID == oldID {
		t.Fatal("restarted primary kept its replication ID")
	}
	redistest.WaitFor(t, 15*time.Second, "full resync with the restarted primary", func() bool {
		return xc.InfoInt(t, "proxy", "upstream_full_syncs") == fulls+1 &&
			xc.Info(t, "replication")["master_link_status"] == "up"
	})
	writeMixed(t, pc, 200)
	waitOffsetsEqual(t, pc, xc)
	info := xc.Info(t, "replication")
	if info["master_replid"] != pc.Info(t, "replication")["master_replid"] {
		t.Fatalf("proxy replid %s, primary %s", info["master_replid"], newID)
	}
	if got := xc.InfoInt(t, "proxy", "stream_generation"); got != gen+1 {
		t.Fatalf("stream generation %d, want %d", got, gen+1)
	}
}

// TestUpstreamStreamContent: large values (1 MiB and 20 MiB, split across
// blocks and reads), scripts whose writes are wrapped in MULTI/EXEC, and
// SELECT of several databases. The proxy's stream is byte-identical to the
// primary's backlog, and WAIT (GETACK) still counts it.
func TestUpstreamStreamContent(t *testing.T) {
	primary, pc := startPrimary(t, "--repl-backlog-size", "128mb")
	p, xc := startProxyOf(t, primary, "--repl-backlog-size", "128mb")
	waitOffsetsEqual(t, pc, xc)
	from := xc.InfoInt(t, "replication", "master_repl_offset") + 1

	pc.MustDo(t, "SET", "big1", strings.Repeat("a", 1<<20))
	for db := range 4 {
		pc.MustDo(t, "SELECT", db)
		pc.MustDo(t, "SET", fmt.Sprintf("k%d", db), db)
		pc.MustDo(t, "EVAL", "redis.call('SET', KEYS[1], 'x'); redis.call('INCR', KEYS[2]); return 1", 2, "s", "n")
	}
	pc.MustDo(t, "SELECT", 0)
	pc.MustDo(t, "SET", "big20", strings.Repeat("b", 20<<20))
	if n, err := pc.Do("WAIT", 1, 5000); err != nil || n.Integer() != 1 {
		t.Fatalf("WAIT after big values and scripts = %v, %v", n, err)
	}
	pc.MustDo(t, "MULTI")
	pc.MustDo(t, "SET", "m1", 1)
	pc.MustDo(t, "SET", "m2", strings.Repeat("c", 40000))
	pc.MustDo(t, "EXEC")
	end := waitOffsetsEqual(t, pc, xc)
	if n, err := pc.Do("WAIT", 1, 5000); err != nil || n.Integer() != 1 {
		t.Fatalf("WAIT after MULTI/EXEC = %v, %v", n, err)
	}
	end = waitOffsetsEqual(t, pc, xc)

	want := primaryBacklog(t, primary.Addr(), pc.Info(t, "replication")["master_replid"], from, end-from+1)
	got := readStream(t, p.Server, from, end)
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("proxy stream (%d bytes) differs from the primary's backlog (%d bytes) at offset %d", len(got), len(want), from+int64(i))
	}
	if !bytes.Contains(want, []byte("MULTI")) || !bytes.Contains(want, []byte("SELECT")) {
		t.Fatal("the stream carried no MULTI or SELECT: the test did not test them")
	}
}

// TestUpstreamAuth: the proxy authenticates with masterauth, alone and with
// masteruser (an ACL user that may only replicate).
func TestUpstreamAuth(t *testing.T) {
	t.Run("requirepass", func(t *testing.T) {
		primary := redistest.StartServer(t, "--repl-diskless-sync-delay", "0", "--requirepass", "s3cret")
		pc, err := redistest.DialOpts(t, primary.Addr(), redistest.DialOptions{Password: "s3cret"})
		if err != nil {
			t.Fatal(err)
		}
		_, xc := startProxyOf(t, primary, "--masterauth", "s3cret")
		writeMixed(t, pc, 100)
		waitOffsetsEqual(t, pc, xc)
	})
	t.Run("masteruser", func(t *testing.T) {
		primary, pc := startPrimary(t)
		pc.MustDo(t, "ACL", "SETUSER", "repl", "on", ">replpw", "+psync", "+replconf", "+ping")
		_, xc := startProxyOf(t, primary, "--masteruser", "repl", "--masterauth", "replpw")
		writeMixed(t, pc, 100)
		waitOffsetsEqual(t, pc, xc)
	})
	t.Run("wrong password", func(t *testing.T) {
		primary := redistest.StartServer(t, "--requirepass", "right")
		p := startProxy(t, append(replicaOf(primary), "--masterauth", "wrong")...)
		redistest.WaitFor(t, 5*time.Second, "AUTH failure logged", func() bool {
			return p.Log.Contains("AUTH refused")
		})
		xc := redistest.Dial(t, p.AddrString())
		if st := xc.Info(t, "replication")["master_link_status"]; st != "down" {
			t.Fatalf("link %s with a wrong password", st)
		}
	})
}

// TestRoleAndInfoAsReplica: ROLE and INFO as a chained replica reports them.
func TestRoleAndInfoAsReplica(t *testing.T) {
	primary, pc := startPrimary(t)
	_, xc := startProxyOf(t, primary)
	writeMixed(t, pc, 10)
	off := waitOffsetsEqual(t, pc, xc)
	role := xc.MustDo(t, "ROLE").Array()
	if len(role) != 6 || role[0].String() != "slave" || role[1].String() != "127.0.0.1" ||
		role[2].Integer() != primary.Port() || role[3].String() != "connected" || int64(role[4].Integer()) != off {
		t.Fatalf("ROLE = %v", role)
	}
	info := xc.Info(t, "replication")
	for key, want := range map[string]string{
		"role": "slave", "master_host": "127.0.0.1", "master_port": strconv.Itoa(primary.Port()),
		"master_link_status": "up", "master_sync_in_progress": "0", "slave_priority": "0",
		"master_replid": pc.Info(t, "replication")["master_replid"], "repl_backlog_active": "1",
	} {
		if info[key] != want {
			t.Errorf("INFO replication %s = %q, want %q", key, info[key], want)
		}
	}
	if _, ok := xc.Info(t, "server")["process_id"]; !ok {
		t.Error("INFO server has no process_id")
	}
	if v, err := xc.Do("GET", "x"); err == nil || !strings.Contains(err.Error(), "replproxy") {
		t.Errorf("GET answered %v, %v; want an error naming replproxy", v, err)
	}
	if v := xc.MustDo(t, "PING"); v.String() != "PONG" {
		t.Errorf("PING = %v", v)
	}
}

// writeMixed sends n pipelined writes of several kinds to the primary.
func writeMixed(t testing.TB, c *redistest.Client, n int) {
	t.Helper()
	for i := range n {
		var err error
		switch i % 4 {
		case 0:
			err = c.Send("SET", fmt.Sprintf("s:%d", i), strings.Repeat("v", 1+i%300))
		case 1:
			err = c.Send("INCR", "counter")
		case 2:
			err = c.Send("RPUSH", "list", i)
		default:
			err = c.Send("HSET", "hash", fmt.Sprintf("f%d", i%50), i)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := c.Receive(); err != nil {
			t.Fatal(err)
		}
	}
}

// readSnapshot reads a snapshot's bytes through a cursor.
func readSnapshot(t testing.TB, sn *replbuf.Snapshot) []byte {
	t.Helper()
	r, err := sn.NewReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []byte
	for {
		bufs, err := r.Pending()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, b := range *bufs {
			out = append(out, b...)
			n += len(b)
		}
		r.Advance(int64(n))
	}
}

// checkRDBTrailer verifies an RDB's CRC64 trailer independently of the snapshot.
func checkRDBTrailer(t testing.TB, rdb []byte) {
	t.Helper()
	if len(rdb) < 9+8 || string(rdb[:5]) != "REDIS" {
		t.Fatalf("not an RDB: %q", rdb[:min(len(rdb), 9)])
	}
	body, trailer := rdb[:len(rdb)-8], binary.LittleEndian.Uint64(rdb[len(rdb)-8:])
	if trailer == 0 {
		t.Fatal("RDB has no checksum: nothing was verified")
	}
	if got := rdbcheck.CRC64(0, body); got != trailer {
		t.Fatalf("RDB checksum %016x, trailer %016x", got, trailer)
	}
}

// readStream returns the proxy's stream bytes from offset from to end.
func readStream(t testing.TB, s *Server, from, end int64) []byte {
	t.Helper()
	c, err := s.hist.Stream().Attach(from)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []byte
	for int64(len(out)) < end-from+1 {
		bufs, err := c.Pending()
		if err != nil {
			t.Fatal(err)
		}
		if len(*bufs) == 0 {
			break
		}
		n := 0
		for _, b := range *bufs {
			out = append(out, b...)
			n += len(b)
		}
		c.Advance(int64(n))
	}
	return out[:min(len(out), int(end-from+1))]
}

// primaryBacklog asks the primary itself for n bytes of its backlog from
// offset from, with a PSYNC as a replica would: the reference for byte-exact
// relaying.
func primaryBacklog(t testing.TB, addr, replID string, from, n int64) []byte {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	rd := wire.NewCommandReader(conn, wire.Limits{})
	conn.Write(wire.AppendCommand(nil, "PSYNC", replID, strconv.FormatInt(from, 10)))
	line, err := rd.ReadReplyLine(256)
	if err != nil || !bytes.HasPrefix(line, []byte("+CONTINUE")) {
		t.Fatalf("PSYNC %s %d to the primary: %q, %v", replID, from, line, err)
	}
	out := make([]byte, n)
	if _, err := io.ReadFull(rd.Reader(), out); err != nil {
		t.Fatalf("reading %d bytes of the primary's backlog: %v", n, err)
	}
	return out
}

// TestUpstreamReplTimeout: a primary that goes silent (SIGSTOP) is dropped
// after repl-timeout, and once it is back the proxy resumes by partial
// resync. With the primary's pings every second, a 2 s timeout never fires
// while it is alive.
func TestUpstreamReplTimeout(t *testing.T) {
	primary, pc := startPrimary(t, "--repl-ping-replica-period", "1")
	p, xc := startProxyOf(t, primary, "--repl-timeout", "2")
	// Time passing with pings flowing, longer than repl-timeout, is what is
	// tested: nothing must happen. Four PINGs (14 bytes each, nothing else
	// written) are more than 3 s of a live primary.
	from := xc.InfoInt(t, "replication", "master_repl_offset")
	redistest.WaitFor(t, 15*time.Second, "four PINGs from the primary", func() bool {
		return xc.InfoInt(t, "replication", "master_repl_offset") >= from+4*14
	})
	if p.Log.Contains("repl-timeout") {
		t.Fatal("link timed out while the primary was alive")
	}
	partial := pc.InfoInt(t, "stats", "sync_partial_ok")
	primary.Pause()
	redistest.WaitFor(t, 6*time.Second, "timeout noticed", func() bool {
		return p.Log.Contains("repl-timeout")
	})
	primary.Resume()
	waitLinkUp(t, xc)
	redistest.WaitFor(t, 10*time.Second, "partial resync after the timeout", func() bool {
		return pc.InfoInt(t, "stats", "sync_partial_ok") == partial+1
	})
	writeMixed(t, pc, 50)
	waitOffsetsEqual(t, pc, xc)
}
