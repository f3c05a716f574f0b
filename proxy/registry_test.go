package proxy

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/history"
)

// TestDisconnectReplicasByEpoch: after an identity change, the replicas
// planned before it are disconnected and one planned since (between the
// change and the disconnection, which no longer share a lock) keeps its
// connection.
func TestDisconnectReplicasByEpoch(t *testing.T) {
	s := linkNewServer(t, hclog.Off)
	register := func(epoch uint64) *downstream.Replica {
		conn, _ := linkPipe(t)
		r := downstream.New(downstream.Config{Conn: conn, Counters: s.replicaCounters(), Plan: history.Plan{Epoch: epoch}, Hist: s.hist, Log: hclog.NewNullLogger()})
		s.clients.addReplica(r)
		return r
	}
	before, since := register(1), register(2)
	s.clients.disconnectReplicas(downstream.CloseReplIDChanged, 2)
	if !before.Closed() {
		t.Error("a replica planned before the change kept its connection")
	}
	if since.Closed() {
		t.Error("a replica planned since the change was disconnected")
	}
}
