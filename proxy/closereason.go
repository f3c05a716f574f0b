package proxy

import (
	"errors"
	"io"
	"net"
	"sync/atomic"

	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
)

// A closeReason says why a client's or a replica's connection ended, as
// nats-server's ClosedState does. The first reason recorded for a connection
// is the one kept: it is logged once and counted per reason in INFO's proxy
// section (replicas_closed_<reason>, clients_closed_<reason>).
type closeReason int32

const (
	closeNone              closeReason = iota // still open
	closedByPeer                              // the peer closed the connection
	closeReadError                            // reading from the peer failed
	closeWriteError                           // writing to the peer failed or timed out
	closeProtocolError                        // the peer broke the protocol
	closeQueryBufferLimit                     // a command over client-query-buffer-limit
	closeOutputHardLimit                      // output over the hard limit of client-output-buffer-limit
	closeOutputSoftLimit                      // output over the soft limit for longer than its period
	closeReplicaTimeout                       // no REPLCONF ACK for longer than repl-timeout
	closeFullSyncFailed                       // the snapshot for a full sync failed or no longer fits the stream
	closeSnapshotSent                         // an rdb-only replica got its snapshot: done
	closeReplIDChanged                        // the primary changed the replication ID (+CONTINUE <new id>)
	closeGenerationChanged                    // a new stream generation (an upstream full resync)
	closeKilled                               // CLIENT KILL
	closeQuit                                 // QUIT
	closeServerShutdown                       // the server stopped
	numCloseReasons
)

// String returns the reason as INFO and the logs name it.
func (r closeReason) String() string {
	switch r {
	case closeNone:
		return "none"
	case closedByPeer:
		return "closed_by_peer"
	case closeReadError:
		return "read_error"
	case closeWriteError:
		return "write_error"
	case closeProtocolError:
		return "protocol_error"
	case closeQueryBufferLimit:
		return "query_buffer_limit"
	case closeOutputHardLimit:
		return "output_hard_limit"
	case closeOutputSoftLimit:
		return "output_soft_limit"
	case closeReplicaTimeout:
		return "replica_timeout"
	case closeFullSyncFailed:
		return "full_sync_failed"
	case closeSnapshotSent:
		return "rdb_only_done"
	case closeReplIDChanged:
		return "replid_changed"
	case closeGenerationChanged:
		return "generation_changed"
	case closeKilled:
		return "killed"
	case closeQuit:
		return "quit"
	case closeServerShutdown:
		return "server_shutdown"
	}
	return "unknown"
}

// appliesToReplicas and appliesToClients say which reasons INFO lists for
// replicas and for the other clients: each can only happen to one of them or
// to both.
func (r closeReason) appliesToReplicas() bool {
	return r != closeNone && r != closeQuit && r < numCloseReasons
}

func (r closeReason) appliesToClients() bool {
	switch r {
	case closeNone, closeReplicaTimeout, closeFullSyncFailed, closeSnapshotSent,
		closeReplIDChanged, closeGenerationChanged:
		return false
	}
	return r < numCloseReasons
}

// closeCounts counts closed connections per reason. Any goroutine.
type closeCounts [numCloseReasons]atomic.Int64

func (c *closeCounts) add(r closeReason) {
	if r >= 0 && r < numCloseReasons {
		c[r].Add(1)
	}
}

// firstReason records r in slot unless a reason is recorded already, and
// reports whether it was.
func firstReason(slot *atomic.Int32, r closeReason) bool {
	return slot.CompareAndSwap(int32(closeNone), int32(r))
}

// readCloseReason classifies the error that ended reading from a peer.
func readCloseReason(err error) closeReason {
	var pe *wire.ProtocolError
	switch {
	case errors.As(err, &pe):
		return closeProtocolError
	case errors.Is(err, wire.ErrQueryLimit):
		return closeQueryBufferLimit
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return closedByPeer
	case errors.Is(err, net.ErrClosed):
		// Only the proxy closes its end, and it records why before it
		// does; what is left is the shutdown closing every connection.
		return closeServerShutdown
	}
	return closeReadError
}

// fullSyncError marks an error of the full-sync payload (the snapshot or its
// fetch) as opposed to one of the connection.
type fullSyncError struct{ err error }

func (e fullSyncError) Error() string { return e.err.Error() }
func (e fullSyncError) Unwrap() error { return e.err }

// writeCloseReason classifies the error that ended a replica's writer.
func writeCloseReason(err error) closeReason {
	var ne net.Error
	var fe fullSyncError
	switch {
	case errors.Is(err, replbuf.ErrReset):
		return closeGenerationChanged
	case errors.As(err, &ne):
		return closeWriteError
	case errors.As(err, &fe), errors.Is(err, errSnapshotFailed):
		return closeFullSyncFailed
	}
	return closeWriteError
}
