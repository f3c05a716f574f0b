package proxy

import (
	"cmp"
	"net"
	"slices"

	"github.com/replproxy/replproxy/proxy/clustertopo"
	"github.com/replproxy/replproxy/proxy/wire"
)

// CLUSTER SHARDS and CLUSTER SLOTS on a proxy that follows a cluster
// (replicaof-cluster): the shards it serves, their slots, and the proxy's
// node that serves each, in Redis 7.0's reply shapes, so that an operator
// or a tool sees which port holds which slots. The proxy is no cluster
// node: it shows itself as the primary of what it serves (role master,
// its run ID as the node ID, the address the client reached, its
// replication offset), lists no replica, and serves no other CLUSTER
// subcommand (answered as unknown, as every subcommand the proxy does not
// serve). Without replicaof-cluster both answer as a redis-server without
// cluster support does.

// errClusterDisabled is redis-server's reply to CLUSTER without
// cluster-enabled.
const errClusterDisabled = "ERR This instance has cluster support disabled"

// cmdCluster is CLUSTER SHARDS, SLOTS and HELP (the subcommands the
// table serves of CLUSTER).
func (s *Server) cmdCluster(c *client, args [][]byte) bool {
	if len(s.config().ClusterSeeds) == 0 {
		c.out = wire.AppendError(c.out, errClusterDisabled)
		return false
	}
	shards := s.clusterShards()
	ip := ""
	if host, _, err := net.SplitHostPort(c.laddr); err == nil {
		ip = host
	}
	switch wire.Lower(string(args[1])) {
	case "help":
		c.out = appendHelp(c.out, "cluster")
	case "slots":
		c.out = appendClusterSlots(c.out, c.proto(), shards, ip)
	default:
		c.out = appendClusterShards(c.out, c.proto(), shards, ip)
	}
	return false
}

// clusterShards returns the shards the proxy serves: the set's map under
// cluster-shard all (Options.ClusterMap), else the one shard this server
// follows, with the slots its follower last found.
func (s *Server) clusterShards() []ClusterShard {
	if m := s.commands.clusterMap; m != nil {
		return m()
	}
	cfg := s.config()
	sh := ClusterShard{NodeID: s.process.RunID, Port: cfg.Port, TLSPort: cfg.TLSPort, Offset: s.hist.Stream().Offset()}
	if slots := s.stats.ClusterSlots.Load(); slots != nil {
		sh.Slots = *slots
	}
	return []ClusterShard{sh}
}

// appendClusterShards appends CLUSTER SHARDS's reply as Redis 7.0 writes
// it (clusterCommandShards): per shard a map of slots (start and end
// alternating) and nodes, each node a map of id, port, tls-port, ip,
// endpoint, role, replication-offset and health.
func appendClusterShards(b []byte, p wire.Proto, shards []ClusterShard, ip string) []byte {
	b = wire.AppendArrayHeader(b, len(shards))
	for _, sh := range shards {
		b = p.AppendMapHeader(b, 2)
		b = wire.AppendBulkString(b, "slots")
		b = wire.AppendArrayHeader(b, 2*len(sh.Slots))
		for _, r := range sh.Slots {
			b = wire.AppendInt(b, int64(r.First))
			b = wire.AppendInt(b, int64(r.Last))
		}
		b = wire.AppendBulkString(b, "nodes")
		b = wire.AppendArrayHeader(b, 1)
		n := 6
		if sh.Port != 0 {
			n++
		}
		if sh.TLSPort != 0 {
			n++
		}
		b = p.AppendMapHeader(b, n)
		b = wire.AppendBulkString(b, "id")
		b = wire.AppendBulkString(b, sh.NodeID)
		if sh.Port != 0 {
			b = wire.AppendBulkString(b, "port")
			b = wire.AppendInt(b, int64(sh.Port))
		}
		if sh.TLSPort != 0 {
			b = wire.AppendBulkString(b, "tls-port")
			b = wire.AppendInt(b, int64(sh.TLSPort))
		}
		b = wire.AppendBulkString(b, "ip")
		b = wire.AppendBulkString(b, ip)
		b = wire.AppendBulkString(b, "endpoint")
		b = wire.AppendBulkString(b, ip)
		b = wire.AppendBulkString(b, "role")
		b = wire.AppendBulkString(b, string(clustertopo.RolePrimary))
		b = wire.AppendBulkString(b, "replication-offset")
		b = wire.AppendInt(b, sh.Offset)
		b = wire.AppendBulkString(b, "health")
		b = wire.AppendBulkString(b, string(clustertopo.HealthOnline))
	}
	return b
}

// appendClusterSlots appends CLUSTER SLOTS's reply as Redis 7.0 writes it
// (clusterReplyMultiBulkSlots): one entry per slot range, in slot order,
// of its first and last slot and its primary: ip, port, node ID and a map
// of further endpoints (none here). A shard without slots is not listed.
func appendClusterSlots(b []byte, p wire.Proto, shards []ClusterShard, ip string) []byte {
	type entry struct {
		r  clustertopo.SlotRange
		sh *ClusterShard
	}
	var entries []entry
	for i := range shards {
		for _, r := range shards[i].Slots {
			entries = append(entries, entry{r, &shards[i]})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(a.r.First, b.r.First) })
	b = wire.AppendArrayHeader(b, len(entries))
	for _, e := range entries {
		b = wire.AppendArrayHeader(b, 3)
		b = wire.AppendInt(b, int64(e.r.First))
		b = wire.AppendInt(b, int64(e.r.Last))
		b = wire.AppendArrayHeader(b, 4)
		b = wire.AppendBulkString(b, ip)
		b = wire.AppendInt(b, int64(cmp.Or(e.sh.Port, e.sh.TLSPort)))
		b = wire.AppendBulkString(b, e.sh.NodeID)
		b = p.AppendMapHeader(b, 0)
	}
	return b
}
