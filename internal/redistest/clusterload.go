package redistest

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ClusterWrites is a cluster-aware write load on a [Cluster]: SETs of
// 20,000 keys over every slot, each sent to the node that serves its slot
// (CLUSTER SLOTS, updated by MOVED), and retried after an error a failover,
// a resharding or a stopped node explains (MOVED, ASK, CLUSTERDOWN,
// TRYAGAIN, LOADING, a refused or broken connection) until it succeeds or
// the load is stopped. It runs on a goroutine of its own from
// [StartClusterWrites] to [ClusterWrites.Stop], which the test's cleanup
// calls too.
type ClusterWrites struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	n      int   // writes acknowledged; guarded by mu
	err    error // the error that ended the load early; guarded by mu
}

// StartClusterWrites starts a write load on c.
func StartClusterWrites(t testing.TB, c *Cluster) *ClusterWrites {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &ClusterWrites{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		err := clusterWriteLoop(ctx, c.Addrs(), DialOptions{Password: c.Password(), Timeout: 2 * time.Second}, func() {
			w.mu.Lock()
			w.n++
			w.mu.Unlock()
		})
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
	}()
	t.Cleanup(w.Stop)
	return w
}

// Acked returns how many writes were acknowledged so far.
func (w *ClusterWrites) Acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// WaitWrites waits up to 30 s until n more writes were acknowledged, and
// fails the test if the load ended with an error.
func (w *ClusterWrites) WaitWrites(t testing.TB, n int) {
	t.Helper()
	w.mu.Lock()
	want := w.n + n
	w.mu.Unlock()
	WaitFor(t, 30*time.Second, strconv.Itoa(n)+" more writes", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.n >= want || w.err != nil
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		t.Fatalf("redistest: the write load ended: %v", w.err)
	}
}

// Stop ends the load and waits for it; a second Stop does nothing.
func (w *ClusterWrites) Stop() {
	w.cancel()
	<-w.done
}

// clusterWriteLoop writes until ctx ends, calling acked after each
// acknowledged write; it returns an error only for a reply no failover or
// resharding explains.
func clusterWriteLoop(ctx context.Context, nodes []string, dial DialOptions, acked func()) error {
	var owner [ClusterSlots]string
	conns := map[string]*Client{}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	refresh := func() {
		for _, addr := range nodes {
			if clusterSlotOwners(addr, dial, &owner) == nil {
				return
			}
		}
	}
	conn := func(addr string) (*Client, error) {
		if c := conns[addr]; c != nil {
			return c, nil
		}
		c, err := Connect(addr, dial)
		if err == nil {
			conns[addr] = c
		}
		return c, err
	}
	refresh()
	for i := 0; ctx.Err() == nil; i++ {
		key := "key:" + strconv.Itoa(i%20000)
		slot := KeySlot(key)
		for ctx.Err() == nil {
			addr := owner[slot]
			err := set(conn, addr, key, i, false)
			var re *ReplyError
			if errors.As(err, &re) && re.Prefix() == "ASK" {
				// The slot is moving and this key is at the importing node
				// already, which takes it after ASKING.
				if f := strings.Fields(re.Msg); len(f) == 3 {
					addr = f[2]
					err = set(conn, addr, key, i, true)
				}
			}
			if err == nil {
				acked()
				break
			}
			switch {
			case errors.As(err, &re) && re.Prefix() == "MOVED":
				if f := strings.Fields(re.Msg); len(f) == 3 {
					owner[slot] = f[2]
				}
				refresh()
			case errors.As(err, &re) && re.Prefix() != "CLUSTERDOWN" && re.Prefix() != "TRYAGAIN" &&
				re.Prefix() != "LOADING" && re.Prefix() != "ASK":
				return err
			default: // the node is down, the cluster failing over, or a slot moving
				if !errors.As(err, &re) {
					if c := conns[addr]; c != nil {
						c.Close()
						delete(conns, addr)
					}
				}
				pause(ctx)
				refresh()
			}
		}
	}
	return nil
}

// set sends SET key i to the node at addr (conn's connection to it),
// after ASKING when asking.
func set(conn func(string) (*Client, error), addr, key string, i int, asking bool) error {
	c, err := conn(addr)
	if err != nil {
		return err
	}
	if asking {
		if _, err := c.Do("ASKING"); err != nil {
			return err
		}
	}
	_, err = c.Do("SET", key, i)
	return err
}

// pause waits 50 ms, or until ctx ends.
func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(50 * time.Millisecond):
	}
}

// clusterSlotOwners fills owner with each slot's primary as the node at
// addr sees it (CLUSTER SLOTS).
func clusterSlotOwners(addr string, dial DialOptions, owner *[ClusterSlots]string) error {
	c, err := Connect(addr, dial)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := c.Do("CLUSTER", "SLOTS")
	if err != nil {
		return err
	}
	for _, r := range v.Array() {
		e := r.Array()
		if len(e) < 3 || len(e[2].Array()) < 2 {
			return errors.New("a CLUSTER SLOTS entry without a primary")
		}
		node := net.JoinHostPort(e[2].Array()[0].String(), e[2].Array()[1].String())
		for s := e[0].Integer(); s <= e[1].Integer() && s < ClusterSlots; s++ {
			owner[s] = node
		}
	}
	return nil
}

// KeySlot is Redis Cluster's hash slot of key: CRC16 (XMODEM) of its hash
// tag, or of the whole key when it has none, modulo 16384.
func KeySlot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % ClusterSlots
}
