package downstream

import (
	"errors"
	"io"
	"net"
	"sync/atomic"

	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
)

// A CloseReason says why a client's or a replica's connection ended, as
// nats-server's ClosedState does. The first reason recorded for a connection
// is the one kept: it is logged once and counted per reason in INFO's proxy
// section (replicas_closed_<reason>, clients_closed_<reason>).
//
// It is one set for both, defined here because a replica records its own
// and this package may not import the proxy: the proxy's admin clients use
// the same reasons, so that INFO names each cause once whoever it ended.
type CloseReason int32

const (
	CloseNone              CloseReason = iota // still open
	ClosedByPeer                              // the peer closed the connection
	CloseReadError                            // reading from the peer failed
	CloseWriteError                           // writing to the peer failed or timed out
	CloseProtocolError                        // the peer broke the protocol
	CloseQueryBufferLimit                     // a command over client-query-buffer-limit
	CloseOutputHardLimit                      // output over the hard limit of client-output-buffer-limit
	CloseOutputSoftLimit                      // output over the soft limit for longer than its period
	CloseReplicaTimeout                       // no REPLCONF ACK for longer than repl-timeout
	CloseFullSyncFailed                       // the snapshot for a full sync failed or no longer fits the stream
	CloseSnapshotSent                         // an rdb-only replica got its snapshot: done
	CloseReplIDChanged                        // the primary changed the replication ID (+CONTINUE <new id>)
	CloseGenerationChanged                    // a new stream generation (an upstream full resync)
	CloseKilled                               // CLIENT KILL
	CloseQuit                                 // QUIT
	CloseServerShutdown                       // the server stopped
	NumCloseReasons
)

// String returns the reason as INFO and the logs name it.
func (r CloseReason) String() string {
	switch r {
	case CloseNone:
		return "none"
	case ClosedByPeer:
		return "closed_by_peer"
	case CloseReadError:
		return "read_error"
	case CloseWriteError:
		return "write_error"
	case CloseProtocolError:
		return "protocol_error"
	case CloseQueryBufferLimit:
		return "query_buffer_limit"
	case CloseOutputHardLimit:
		return "output_hard_limit"
	case CloseOutputSoftLimit:
		return "output_soft_limit"
	case CloseReplicaTimeout:
		return "replica_timeout"
	case CloseFullSyncFailed:
		return "full_sync_failed"
	case CloseSnapshotSent:
		return "rdb_only_done"
	case CloseReplIDChanged:
		return "replid_changed"
	case CloseGenerationChanged:
		return "generation_changed"
	case CloseKilled:
		return "killed"
	case CloseQuit:
		return "quit"
	case CloseServerShutdown:
		return "server_shutdown"
	}
	return "unknown"
}

// AppliesToReplicas and AppliesToClients say which reasons INFO lists for
// replicas and for the other clients: each can only happen to one of them or
// to both.
func (r CloseReason) AppliesToReplicas() bool {
	return r != CloseNone && r != CloseQuit && r < NumCloseReasons
}

func (r CloseReason) AppliesToClients() bool {
	switch r {
	case CloseNone, CloseReplicaTimeout, CloseFullSyncFailed, CloseSnapshotSent,
		CloseReplIDChanged, CloseGenerationChanged:
		return false
	}
	return r < NumCloseReasons
}

// CloseCounts counts closed connections per reason. Any goroutine.
type CloseCounts [NumCloseReasons]atomic.Int64

func (c *CloseCounts) Add(r CloseReason) {
	if r >= 0 && r < NumCloseReasons {
		c[r].Add(1)
	}
}

// FirstReason records r in slot unless a reason is recorded already, and
// reports whether it was.
func FirstReason(slot *atomic.Int32, r CloseReason) bool {
	return slot.CompareAndSwap(int32(CloseNone), int32(r))
}

// ReadCloseReason classifies the error that ended reading from a peer.
func ReadCloseReason(err error) CloseReason {
	var pe *wire.ProtocolError
	switch {
	case errors.As(err, &pe):
		return CloseProtocolError
	case errors.Is(err, wire.ErrQueryLimit):
		return CloseQueryBufferLimit
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ClosedByPeer
	case errors.Is(err, net.ErrClosed):
		// Only the proxy closes its end, and it records why before it
		// does; what is left is the shutdown closing every connection.
		return CloseServerShutdown
	}
	return CloseReadError
}

// fullSyncError marks an error of the full-sync payload (the snapshot or its
// fetch) as opposed to one of the connection.
type fullSyncError struct{ err error }

func (e fullSyncError) Error() string { return e.err.Error() }
func (e fullSyncError) Unwrap() error { return e.err }

// writeCloseReason classifies the error that ended a replica's writer.
func writeCloseReason(err error) CloseReason {
	var ne net.Error
	var fe fullSyncError
	switch {
	case errors.Is(err, replbuf.ErrReset):
		return CloseGenerationChanged
	case errors.As(err, &ne):
		return CloseWriteError
	case errors.As(err, &fe), errors.Is(err, errSnapshotFailed):
		return CloseFullSyncFailed
	}
	return CloseWriteError
}
