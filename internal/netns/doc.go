// Package netns builds two network "regions" on one Linux machine for tests and
// benchmarks: two network namespaces joined by a veth pair, the WAN between them,
// whose bandwidth is limited with tc tbf and which can be cut and restored.
//
// It owns the namespaces, the veth pair and its qdiscs, and the processes left in
// the namespaces when a [Pair] is closed. It drives the ip and tc programs of
// iproute2 (stdlib only, no netlink library), so it needs root; [Supported] says
// why it cannot run, and [NewPair] skips a test then, or fails it when the
// environment variable CI is true, as internal/redistest does for a missing Redis.
//
// The shape of a [Pair]:
//
//	namespace A                                   namespace B
//	 lo up                                         lo up
//	 veth-a AddrA/30  <=== veth pair (the WAN) ===> veth-b AddrB/30
//	   root qdisc: tbf (A to B)                      root qdisc: tbf (B to A)
//	 cut (ifb, no traffic unless cut)              cut (ifb, no traffic unless cut)
//
// Rules:
//
//   - Names are unique per pair: the namespaces are rp<pid>-<n>a and rp<pid>-<n>b,
//     where n is the first number whose namespace `ip netns add` could create
//     (it fails on an existing name, so parallel tests, and stale namespaces of an
//     earlier process with the same pid, never share one). The interfaces inside
//     have fixed names (veth-a, veth-b, cut), since each namespace has its own.
//   - Addresses are 10.<x>.<n>.1 (A) and 10.<x>.<n>.2 (B) of a /30, x derived from
//     the pid, so the pairs of one process have distinct addresses and their logs
//     do not look alike. Servers in the namespaces listen on these addresses: the
//     one exception to internal/redistest's "127.0.0.1 only", because a region's
//     servers must be reachable from the other region.
//   - The bandwidth limit is a tbf qdisc on the root of BOTH veth ends, so each
//     direction is limited (egress each way). The bucket (burst) is at least 64 KiB:
//     veth hands tbf GSO packets of up to 64 KiB, and a smaller bucket would make
//     tbf split every one of them. The queue (limit) holds 100 ms at the rate. So
//     shaped, 100 Mbit/s is held: one TCP connection carries 95.7 Mbit/s of payload,
//     the rest being its headers (median of 5 runs of `go test -run XXX -bench
//     BenchmarkWAN -benchtime 5x -count 5 ./internal/netns`, on a shared machine).
//   - IPv6 is off in both namespaces, so that nothing crosses the WAN uninvited
//     (neighbour discovery, multicast reports) and the counters count only traffic.
//   - [Pair.Cut] black-holes the WAN without touching the veth or the sockets: in
//     each namespace a /32 route to the other end through "cut", an ifb device, which
//     silently drops what is routed to it (ifb only forwards what tc redirects to it).
//     Packets vanish as on a broken WAN: no RST, no ICMP, no local error, so TCP
//     connections keep their state and carry on after [Pair.Restore] (at their next
//     retransmission), connects time out rather than fail, and traffic inside a
//     namespace (a replica to its proxy) is untouched. The obvious alternative, the
//     veth ends down, would also take the local routes of the addresses on them, and
//     so break the connections inside each region; tc's drop actions (gact, matchall)
//     are not in every kernel (not in this project's CI kernel), ifb and routes are.
//   - [Namespace.CutFlow] black-holes one flow inside a region the same way: the
//     TCP traffic between one address and one port of another, both in the
//     namespace (a proxy dialing from a second address, [Namespace.AddLocalAddr],
//     and its primary), routed to the cut device by policy rules; the local table's
//     rule moves behind them, since it would otherwise deliver the packets first.
//     [Namespace.RestoreFlows] removes the rules.
//   - [Pair.Counters] are the veth ends' tx byte counters (ip -s -j link): bytes that
//     left A for B and B for A, Ethernet, IP and TCP headers included, after tbf (what
//     tbf dropped is not counted) and nothing while cut.
//   - [Pair.Close] SIGKILLs every process still in either namespace (ip netns pids),
//     waits for them to go, and deletes the namespaces, which deletes the veth pair.
//     [NewPair] registers it with t.Cleanup, so it runs when a test fails too; a
//     process started with [Namespace.Command] should still be stopped by its test,
//     as internal/redistest's StartProcess does.
//
// Concurrency: a Pair's methods run ip and tc and keep no state of their own beyond
// the names, so they hold no lock. Cut, Restore and SetRate are meant for the one
// goroutine that runs the test; Counters may be called from any goroutine. A
// Namespace is a name: its methods are safe for concurrent use. [Namespace.Dial] and
// [Namespace.Listen] create a socket inside the namespace from a goroutine locked to
// an OS thread that joins it (setns) and that the runtime then retires; the socket
// stays in that namespace for its life, wherever it is used.
//
// Example:
//
//	pair := netns.NewPair(t, netns.Options{RateBitsPerSec: 100e6})
//	srv := pair.B.Command("redis-server", "--bind", pair.AddrB, "--port", "6379")
//	...
//	conn, err := pair.A.Dial("tcp", net.JoinHostPort(pair.AddrB, "6379"))
//	pair.Cut()     // the WAN is down, both ways
//	pair.Restore() // and up again
//	aToB, bToA, err := pair.Counters()
package netns
