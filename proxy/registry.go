package proxy

import (
	"cmp"
	"slices"
	"sync"

	"github.com/replproxy/replproxy/proxy/downstream"
)

// A registry is the set of connected clients and, among them, the replicas.
//
// Its lock is a leaf: it is never held while another proxy lock is taken, and
// never taken while one (History.mu in particular) is held. Where a change
// touches both the registry and the replication history, the two are done one
// after the other, each under its own lock. Nothing under it blocks, logs or
// touches a socket: callers take a list and act on it after.
type registry struct {
	mu       sync.Mutex
	byID     map[int64]*client                // guarded by mu
	lastID   int64                            // guarded by mu; the id given last
	replicas map[*downstream.Replica]struct{} // guarded by mu; a subset of byID's clients, while they run as replicas
	// handshakes is how many connections accepted on tls-port are still in
	// their TLS handshake; guarded by mu. Redis creates the client at accept,
	// before the handshake: so they count against maxclients and in
	// connected_clients, and a silent TLS connection takes a client's slot,
	// not a descriptor beyond the budget. They have no id yet, so CLIENT
	// LIST does not show them.
	handshakes int
}

func newRegistry() *registry {
	return &registry{byID: make(map[int64]*client), replicas: make(map[*downstream.Replica]struct{})}
}

// add registers a new client made by newClient with the next id, unless
// maxClients are connected already. newClient runs under the lock: it must
// only build the client.
func (g *registry) add(maxClients int, newClient func(id int64) *client) (*client, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.byID)+g.handshakes >= maxClients {
		return nil, false
	}
	return g.addLocked(newClient), true
}

// addLocked registers the client newClient makes with the next id.
// REQUIRES: g.mu held.
func (g *registry) addLocked(newClient func(id int64) *client) *client {
	g.lastID++
	c := newClient(g.lastID)
	g.byID[c.id] = c
	return c
}

// reserve counts a connection whose TLS handshake starts against
// maxClients, unless maxClients are connected (or in their handshake)
// already. The slot is then either given back (unreserve) or taken by the
// client the handshake yields (addReserved).
func (g *registry) reserve(maxClients int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.byID)+g.handshakes >= maxClients {
		return false
	}
	g.handshakes++
	return true
}

// unreserve gives back a slot reserve took: the handshake failed, or the
// connection was refused after it.
func (g *registry) unreserve() {
	g.mu.Lock()
	g.handshakes--
	g.mu.Unlock()
}

// addReserved registers the client of a connection whose slot reserve
// took, without checking maxClients again (Redis checks it once, at accept).
func (g *registry) addReserved(newClient func(id int64) *client) *client {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.handshakes--
	return g.addLocked(newClient)
}

// remove forgets a client that has gone.
func (g *registry) remove(c *client) {
	g.mu.Lock()
	delete(g.byID, c.id)
	g.mu.Unlock()
}

// addReplica registers a client that became a replica.
func (g *registry) addReplica(r *downstream.Replica) {
	g.mu.Lock()
	g.replicas[r] = struct{}{}
	g.mu.Unlock()
}

// removeReplica forgets a replica whose goroutines have ended.
func (g *registry) removeReplica(r *downstream.Replica) {
	g.mu.Lock()
	delete(g.replicas, r)
	g.mu.Unlock()
}

// count returns how many clients are connected, replicas and connections
// in their TLS handshake included (as Redis's connected_clients counts a
// client from accept).
func (g *registry) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.byID) + g.handshakes
}

// clients returns the connected clients in the order they connected.
func (g *registry) clients() []*client {
	g.mu.Lock()
	list := make([]*client, 0, len(g.byID))
	for _, c := range g.byID {
		list = append(list, c)
	}
	g.mu.Unlock()
	slices.SortFunc(list, func(a, b *client) int { return cmp.Compare(a.id, b.id) })
	return list
}

// replicaList returns the replicas in the order they connected.
func (g *registry) replicaList() []*downstream.Replica {
	g.mu.Lock()
	list := make([]*downstream.Replica, 0, len(g.replicas))
	for r := range g.replicas {
		list = append(list, r)
	}
	g.mu.Unlock()
	slices.SortFunc(list, func(a, b *downstream.Replica) int { return cmp.Compare(a.ID(), b.ID()) })
	return list
}

// ackOffsets returns the ACK offsets of the replicas ack-policy replicas
// counts (primary.go's ack-policy): online, not rdb-only, planned in epoch; and, in the
// same order, when each last acknowledged (unix nanoseconds).
func (g *registry) ackOffsets(epoch uint64) (offs, times []int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	offs = make([]int64, 0, len(g.replicas))
	times = make([]int64, 0, len(g.replicas))
	for r := range g.replicas {
		// Atomics and fields fixed at registration: nothing blocks here.
		if off, at, ok := r.AckedIn(epoch); ok {
			offs = append(offs, off)
			times = append(times, at)
		}
	}
	return offs, times
}

// clientMemory is what the clients hold, by memory category.
type clientMemory struct {
	normal, replicaClients int64 // their buffers: admin clients', replicas'
	links                  int64 // the encoders of replicas' compressed links
	replicas               int   // the replicas, those waiting for a snapshot included
}

// memory adds up what the clients' buffers hold, replicas apart, and their
// links' encoders, and counts the replicas, without building a list (the
// monitor asks ten times a second).
func (g *registry) memory() clientMemory {
	g.mu.Lock()
	defer g.mu.Unlock()
	var m clientMemory
	for _, c := range g.byID {
		// bufferBytes and replicaSet read only atomics: nothing blocks here.
		if b := c.bufferBytes(); c.replicaSet() {
			m.replicaClients += b
		} else {
			m.normal += b
		}
	}
	for r := range g.replicas {
		m.links += r.LinkMemory() // an atomic
	}
	m.replicas = len(g.replicas)
	return m
}

// disconnectReplicas closes every replica planned before epoch, after a
// change of the history's identity (a new stream generation or replication
// ID) that made epoch. The change is made already: no lock is held while
// they close (closing logs). A replica planned since keeps its connection,
// as it did when the change and the disconnection were one step under one
// lock.
func (g *registry) disconnectReplicas(reason downstream.CloseReason, epoch uint64) {
	for _, r := range g.replicaList() {
		if r.Epoch() < epoch {
			r.Close(reason, nil)
		}
	}
}
