// Package cluster starts and stops the redis-server and replproxy processes of
// one benchmark run and asks them what they are doing (INFO, DEBUG DIGEST,
// their CPU and peak memory from /proc).
//
// Every process listens on 127.0.0.1, on a port that was free a moment
// before, and works in its own directory under the cluster's temp dir;
// StartRedisAt and StartProxyAt start one at a Place instead: bound to
// another address, started inside a network namespace and dialled from
// inside it (the Place's Dial). Close
// stops each process the cluster started (SIGTERM, then SIGKILL after
// StopTimeout) and removes the temp dir; call it in a defer so that an error
// or a cancelled context (Ctrl-C) stops them too. As a last resort, on Linux
// the kernel SIGKILLs the children if the harness itself dies.
//
// A Cluster is not safe for concurrent use except for the methods of
// Process that only read (Info, CPU, HWM, Offset, Digest); StartRedisMany
// starts many servers at once itself.
package cluster
