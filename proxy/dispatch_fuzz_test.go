package proxy

import (
	"bytes"
	"net"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/wire"
)

// FuzzDispatch feeds arbitrary client input, read through the control-path
// reader with the proxy's limits, to the command table of a server that is
// not running: whatever the bytes, the proxy must answer or refuse, never
// panic. (The server has no upstream link, so PSYNC and SYNC are refused.)
func FuzzDispatch(f *testing.F) {
	for _, seed := range []string{
		"PING\r\n",
		"*3\r\n$8\r\nREPLCONF\r\n$14\r\nlistening-port\r\n$4\r\n7102\r\n",
		"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n",
		"CONFIG SET maxmemory 1mb\r\nCONFIG GET *\r\n",
		"CLIENT KILL TYPE replica\r\nCLIENT LIST\r\nCLIENT SETNAME x\r\n",
		"INFO everything\r\nROLE\r\nREPLICAOF NO ONE\r\nREPLICAOF 127.0.0.1 1\r\n",
		"AUTH a b c\r\nSELECT -1\r\nECHO\r\nCOMMAND DOCS\r\n",
		"REPLCONF ack 5 getack * capa eof rdb-only 1\r\nSYNC\r\n",
	} {
		f.Add([]byte(seed))
	}
	cfg, err := config.Parse([]string{"--port", "0", "--bind", "127.0.0.1"})
	if err != nil {
		f.Fatal(err)
	}
	srv, err := New(cfg, Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	f.Fuzz(func(t *testing.T, input []byte) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		go func() { // drain whatever the client is sent
			buf := make([]byte, 4096)
			for {
				if _, err := b.Read(buf); err != nil {
					return
				}
			}
		}()
		c := newClient(srv, 1, a)
		c.authed = true
		c.rd = wire.NewCommandReader(bytes.NewReader(input), srv.clientConf().limits)
		for range 64 {
			cmd, err := c.rd.ReadCommand()
			if err != nil {
				return
			}
			if len(cmd.Args) == 0 {
				continue
			}
			if srv.dispatch(c, cmd.Args) || c.replicaSet() {
				return
			}
			c.out = c.out[:0]
		}
	})
}
