package proxy

import (
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestReplicaHostCommands: what a replica reads is shown as the client's
// last command in CLIENT LIST (REPLCONF for its ACKs, the command itself
// otherwise), and a command it runs sends no reply on the replication
// connection.
func TestReplicaHostCommands(t *testing.T) {
	s := linkNewServer(t, hclog.Off)
	conn, _ := linkPipe(t)
	c := s.clientOf(1, conn)
	h := &replicaHost{s: s, c: c, replconf: s.commands.byName["replconf"].name}
	h.Replconf()
	if got := *c.lastCmd.Load(); got != "replconf" {
		t.Fatalf("after REPLCONF the last command is %q", got)
	}
	h.Command([][]byte{[]byte("PING")})
	if got := *c.lastCmd.Load(); got != "ping" || len(c.out) != 0 {
		t.Fatalf("after PING the last command is %q, with %q to reply", got, c.out)
	}
}
