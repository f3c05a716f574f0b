package clustertopo

import (
	"fmt"
	"net"
	"strconv"
)

// What a node's fields may hold, whichever command reported them. A value
// outside these bounds makes the whole reply refused: a node that reports
// it is broken or hostile, and its view of the cluster is not followed.
const (
	// maxHost is the longest host (an IP, an endpoint, a hostname), as DNS
	// bounds a name.
	maxHost = 255
	// maxWord is the longest health value kept as reported.
	maxWord = 32
	// unknownEndpoint is the endpoint Redis reports under
	// cluster-preferred-endpoint-type unknown-endpoint.
	unknownEndpoint = "?"
)

// checkHost refuses a host that is longer than maxHost or holds a byte
// other than printable ASCII without spaces. "" is no host.
func checkHost(what, s string) error {
	if len(s) > maxHost {
		return fmt.Errorf("%s of %d bytes: longer than %d", what, len(s), maxHost)
	}
	if !printable(s) {
		return fmt.Errorf("%s %q: not printable ASCII", what, quote(s))
	}
	return nil
}

// printable reports whether s holds only printable ASCII without spaces.
func printable(s string) bool {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// checkPort refuses a port outside 0-65535 (0: none).
func checkPort(what string, n int64) (int, error) {
	if n < 0 || n > 65535 {
		return 0, fmt.Errorf("%s %d: not a port", what, n)
	}
	return int(n), nil
}

// joinAddr returns host:port, or "" when there is no host or no port.
func joinAddr(host string, port int) string {
	if host == "" || host == unknownEndpoint || port == 0 {
		return ""
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// parseRole reads a role as CLUSTER SHARDS ("master", "replica") or
// CLUSTER NODES's flags ("slave") write it, and Valkey's "primary".
func parseRole(s string) (Role, error) {
	switch s {
	case "master", "primary":
		return RolePrimary, nil
	case "replica", "slave":
		return RoleReplica, nil
	}
	return "", fmt.Errorf("role %q: neither master nor replica", quote(s))
}

// parseHealth reads CLUSTER SHARDS's health: "failed", as its
// documentation says, is HealthFail; another short printable word is kept.
func parseHealth(s string) (Health, error) {
	switch s {
	case "online":
		return HealthOnline, nil
	case "fail", "failed":
		return HealthFail, nil
	case "loading":
		return HealthLoading, nil
	}
	if s == "" || len(s) > maxWord || !printable(s) {
		return "", fmt.Errorf("health %q: not a word of up to %d printable bytes", quote(s), maxWord)
	}
	return Health(s), nil
}
