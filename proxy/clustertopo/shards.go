package clustertopo

import (
	"errors"
	"fmt"
)

// parseShards reads CLUSTER SHARDS's reply (Redis 7.0 and later, Valkey), in
// RESP2: an array of shards, each a map with "slots" (a flat list of first
// and last slots, pairs of integers) and "nodes" (a list of maps: id, port,
// tls-port, ip, endpoint, hostname, role, replication-offset, health).
// Keys it does not know are skipped, so that fields a later server adds are
// no error; a known key with a value of another shape is.
func parseShards(v value) (Topology, error) {
	elems, ok := v.array()
	if !ok {
		return Topology{}, errors.New("CLUSTER SHARDS: the reply is not an array")
	}
	t := Topology{Source: FromShards}
	for i, e := range elems {
		sh, err := parseShard(e)
		if err != nil {
			return Topology{}, fmt.Errorf("CLUSTER SHARDS: shard %d: %w", i, err)
		}
		t.Shards = append(t.Shards, sh)
	}
	if err := t.finish(); err != nil {
		return Topology{}, fmt.Errorf("CLUSTER SHARDS: %w", err)
	}
	return t, nil
}

// parseShard reads one shard's map.
func parseShard(v value) (Shard, error) {
	fields, err := v.fields()
	if err != nil {
		return Shard{}, err
	}
	var sh Shard
	var slots, nodes bool
	for _, f := range fields {
		switch f.key {
		case "slots":
			slots = true
			bounds, ok := f.val.array()
			if !ok || len(bounds)%2 != 0 {
				return Shard{}, errors.New("slots: not a list of first and last slots")
			}
			for i := 0; i < len(bounds); i += 2 {
				first, ok1 := bounds[i].integer()
				last, ok2 := bounds[i+1].integer()
				if !ok1 || !ok2 || first < 0 || last < first || last >= Slots {
					return Shard{}, fmt.Errorf("slots: pair %d is no range within 0-%d", i/2, Slots-1)
				}
				sh.Slots = append(sh.Slots, SlotRange{First: int(first), Last: int(last)})
			}
		case "nodes":
			nodes = true
			list, ok := f.val.array()
			if !ok {
				return Shard{}, errors.New("nodes: not a list")
			}
			for i, nv := range list {
				n, err := parseShardNode(nv)
				if err != nil {
					return Shard{}, fmt.Errorf("node %d: %w", i, err)
				}
				sh.Nodes = append(sh.Nodes, n)
			}
		}
	}
	if !slots || !nodes {
		return Shard{}, errors.New("no slots or no nodes")
	}
	return sh, nil
}

// parseShardNode reads one node's map: id and role are required, the rest
// may be missing (a node with no plain port has no "port").
func parseShardNode(v value) (Node, error) {
	fields, err := v.fields()
	if err != nil {
		return Node{}, err
	}
	var n Node
	var ip, endpoint string
	var port, tlsPort int
	var id, role bool
	for _, f := range fields {
		var err error
		switch f.key {
		case "id":
			id = true
			n.ID, err = textField(f)
		case "port", "tls-port":
			var p int64
			if p, err = intField(f); err == nil {
				var pp int
				pp, err = checkPort(f.key, p)
				if f.key == "port" {
					port = pp
				} else {
					tlsPort = pp
				}
			}
		case "ip", "endpoint", "hostname":
			var s string
			if s, err = textField(f); err == nil {
				err = checkHost(f.key, s)
			}
			switch f.key {
			case "ip":
				ip = s
			case "endpoint":
				endpoint = s
			default:
				n.Hostname = s
			}
		case "role":
			role = true
			var s string
			if s, err = textField(f); err == nil {
				n.Role, err = parseRole(s)
			}
		case "replication-offset":
			if n.Offset, err = intField(f); err == nil && n.Offset < 0 {
				err = fmt.Errorf("replication-offset %d: negative", n.Offset)
			}
		case "health":
			var s string
			if s, err = textField(f); err == nil {
				n.Health, err = parseHealth(s)
			}
		}
		if err != nil {
			return Node{}, err
		}
	}
	if !id || !role {
		return Node{}, errors.New("no id or no role")
	}
	host := endpoint
	if host == "" || host == unknownEndpoint {
		host = ip
	}
	n.Addr = joinAddr(host, port)
	n.TLSAddr = joinAddr(host, tlsPort)
	return n, nil
}

// textField returns a field's string value.
func textField(f field) (string, error) {
	s, ok := f.val.text()
	if !ok {
		return "", fmt.Errorf("%s: not a string", f.key)
	}
	return s, nil
}

// intField returns a field's integer value.
func intField(f field) (int64, error) {
	n, ok := f.val.integer()
	if !ok {
		return 0, fmt.Errorf("%s: not an integer", f.key)
	}
	return n, nil
}
