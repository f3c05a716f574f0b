package proxy

import (
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

const (
	// fuzzInputTimeout bounds each phase of one FuzzDispatch input's
	// exchange: the proxy's answers, and its close after the test's.
	fuzzInputTimeout = 2 * time.Second
	// fuzzQuiet is how long the proxy must send nothing before the test takes
	// its answers as complete and half-closes: long enough for a full sync's
	// RDB or a +CONTINUE to be sent to a replica the input made.
	fuzzQuiet = 50 * time.Millisecond
)

// FuzzDispatch sends arbitrary client input to a running proxy, a fresh one
// per input, whose link to a fake primary (fakePrimary) is up: it holds a
// snapshot and a backlog, and the fake serves snapshot fetches. So PSYNC and
// SYNC in the input register real replicas (a full sync from the snapshot, a
// partial resync when the input names the fake's replid and an offset in the
// backlog) and the replica path runs, ACKs and all. Whatever the bytes, the
// proxy must answer or refuse, never panic, and stop cleanly when the test
// ends. Once the proxy has gone quiet the test half-closes its side, so a
// client or a replica the input made ends at the proxy's next read.
func FuzzDispatch(f *testing.F) {
	partial := strconv.Itoa(linkOffset + 1)
	for _, seed := range []string{
		"PING\r\n",
		"*3\r\n$8\r\nREPLCONF\r\n$14\r\nlistening-port\r\n$4\r\n7102\r\n",
		"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n",
		"REPLCONF capa eof capa psync2\r\nPSYNC ? -1\r\nREPLCONF ACK 1000\r\n",
		"PSYNC " + linkReplID + " " + partial + "\r\nREPLCONF ACK " + partial + "\r\n",
		"PSYNC " + hostileDotsReplID + " 1\r\n",
		"CONFIG SET maxmemory 1mb\r\nCONFIG GET *\r\n",
		"CLIENT KILL TYPE replica\r\nCLIENT LIST\r\nCLIENT SETNAME x\r\n",
		"INFO everything\r\nROLE\r\nREPLICAOF NO ONE\r\nREPLICAOF 127.0.0.1 1\r\n",
		"AUTH a b c\r\nSELECT -1\r\nECHO\r\nCOMMAND DOCS\r\n",
		"REPLCONF ack 5 getack * capa eof rdb-only 1\r\nSYNC\r\n",
		"HELLO 3\r\nHELLO 2 AUTH a b SETNAME x\r\nCLIENT INFO\r\nSLOWLOG GET\r\nLATENCY DOCTOR\r\nTIME\r\nSHUTDOWN\r\n",
		"HELLO 3 SETNAME r3\r\nCONFIG GET *\r\nCLIENT LIST\r\nCLIENT GETNAME\r\nINFO\r\nSUBSCRIBE __sentinel__:hello\r\nUNSUBSCRIBE\r\nUNSUBSCRIBE\r\nCOMMAND DOCS\r\nLATENCY HISTOGRAM\r\n",
		"HELLO 3\r\nREPLCONF listening-port 6380\r\nREPLCONF capa eof capa psync2\r\nPSYNC ? -1\r\nREPLCONF ACK 1000\r\n",
		"SUBSCRIBE a b\r\nPUBLISH a x\r\nPING\r\nINFO\r\nUNSUBSCRIBE\r\nPUBLISH a y\r\nSUBSCRIBE c\r\nQUIT\r\n",
		"COMMAND INFO config|get x\r\nCOMMAND LIST FILTERBY PATTERN c*\r\nCOMMAND\r\n",
		"HELLO 3\r\nSUBSCRIBE a b\r\nPUBLISH a x\r\nCOMMAND INFO ping x\r\nECHO e\r\nHELLO 2\r\nECHO f\r\nPING\r\nUNSUBSCRIBE\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		h := startFakePrimary(t, fakeGoodMain(0), (*fakeLink).goodFetch)
		p := newTestProxy(t, proxySetup{quiet: true,
			args: append(h.replicaOf(), "--repl-timeout", "1", "--dir", t.TempDir())})
		redistest.WaitFor(t, 10*time.Second, "proxy link up", func() bool {
			return redistest.ParseInfo(p.Info("replication"))["master_link_status"] == "up"
		})
		conn := p.dial(t)
		end := time.Now().Add(fuzzInputTimeout)
		conn.SetWriteDeadline(end)
		// Errors are the proxy closing first (QUIT, a protocol error, a
		// limit): part of what is tested, not a failure.
		conn.Write(input)
		buf := make([]byte, 32<<10)
		for time.Now().Before(end) {
			conn.SetReadDeadline(time.Now().Add(fuzzQuiet))
			if _, err := conn.Read(buf); err != nil {
				break
			}
		}
		conn.(*net.TCPConn).CloseWrite()
		conn.SetReadDeadline(time.Now().Add(fuzzInputTimeout))
		io.Copy(io.Discard, conn)
	})
}
