// Package eviction is replproxy's memory accountant: it adds up every category
// of memory the proxy holds, each counted by the usable size of its
// allocations, reports the figures under Redis 7's INFO names, and decides
// what to evict when the memory that counts is over maxmemory.
//
// # What counts
//
// Redis 7 (src/evict.c freeMemoryGetNotCountedMemory) leaves out of the
// maxmemory comparison everything in the shared replication buffer beyond the
// backlog size: memory that exists only because replicas have not read it yet.
// replproxy does the same, and also leaves out its free blocks, which are
// what replica buffers turn into when they are released: counting them would
// let slow replicas cause eviction after all. So
//
//	counted = used_memory - mem_not_counted_for_evict
//
// and only counted memory is compared with maxmemory.
//
// # What may be evicted
//
// In order: free blocks (given back to the Go runtime), then snapshots that no
// replica is receiving — replaced ones before the newest, larger before
// smaller — spilled to disk when the proxy can write there, dropped otherwise. The backlog and the bytes replicas still
// need are never evicted. Under the noeviction policy nothing is evicted: the
// state is reported and the proxy keeps serving.
//
// The package knows no protocol and no blocks: the proxy hands it figures
// (the stream's as replbuf computes them) and candidates, and carries out the
// plan it returns. Every function is pure (it reads only its arguments and
// keeps no state), so any goroutine may call it at any time; Plan sorts a
// copy of the candidates, never the caller's slice.
package eviction
