package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/eviction"
)

// TestSet covers every directive: good values through Get, bad ones through
// the sentinel they wrap. A failed Set must leave the config unchanged.
func TestSet(t *testing.T) {
	seventeen := strings.TrimSpace(strings.Repeat("127.0.0.1 ", 17))
	for _, tc := range []struct {
		name      string
		directive string
		args      []string
		want      string // Get(directive) after a successful Set
		err       error  // wanted sentinel; nil means success
	}{
		{"port", "port", []string{"6380"}, "6380", nil},
		{"port zero", "port", []string{"0"}, "0", nil},
		{"port max", "port", []string{"65535"}, "65535", nil},
		{"port too big", "port", []string{"65536"}, "", ErrInvalidValue},
		{"port negative", "port", []string{"-1"}, "", ErrInvalidValue},
		{"port plus", "port", []string{"+1"}, "", ErrInvalidValue},
		{"port leading zero", "port", []string{"06379"}, "", ErrInvalidValue},
		{"port unit", "port", []string{"1k"}, "", ErrInvalidValue},
		{"port empty", "port", []string{""}, "", ErrInvalidValue},
		{"port no args", "port", nil, "", ErrArgCount},
		{"port two args", "port", []string{"1", "2"}, "", ErrArgCount},

		{"bind words", "bind", []string{"127.0.0.1", "-::1"}, "127.0.0.1 -::1", nil},
		{"bind one value", "bind", []string{"10.0.0.1   ::1"}, "10.0.0.1 ::1", nil},
		{"bind wildcards", "bind", []string{"*", "-::*"}, "* -::*", nil},
		{"bind host name", "bind", []string{"localhost"}, "localhost", nil},
		{"bind zone", "bind", []string{"fe80::1%eth0"}, "fe80::1%eth0", nil},
		{"bind sixteen", "bind", strings.Fields(strings.Repeat("127.0.0.1 ", 16)), strings.TrimSpace(strings.Repeat("127.0.0.1 ", 16)), nil},
		{"bind seventeen", "bind", []string{seventeen}, "", ErrArgCount},
		{"bind empty", "bind", []string{""}, "", ErrArgCount},
		{"bind none", "bind", nil, "", ErrArgCount},
		{"bind bad char", "bind", []string{"local!host"}, "", ErrInvalidValue},
		{"bind bad ip", "bind", []string{"::1x"}, "", ErrInvalidValue},
		{"bind dash only", "bind", []string{"-"}, "", ErrInvalidValue},
		{"bind two dashes", "bind", []string{"--1.2.3.4"}, "", ErrInvalidValue},
		{"bind unbalanced", "bind", []string{`"127.0.0.1`}, "", ErrUnbalancedQuotes},

		{"replicaof", "replicaof", []string{"127.0.0.1", "6379"}, "127.0.0.1 6379", nil},
		{"replicaof one value", "replicaof", []string{"redis.example 6380"}, "redis.example 6380", nil},
		{"replicaof ipv6", "replicaof", []string{"::1", "6379"}, "::1 6379", nil},
		{"slaveof", "slaveof", []string{"10.0.0.1", "6379"}, "10.0.0.1 6379", nil},
		{"replicaof no one", "replicaof", []string{"no", "one"}, "", nil},
		{"replicaof NO ONE", "replicaof", []string{"NO", "ONE"}, "", nil},
		{"replicaof no one as one value", "replicaof", []string{"no one"}, "", nil},
		{"replicaof empty", "replicaof", []string{""}, "", nil},
		{"replicaof host only", "replicaof", []string{"10.0.0.1"}, "", ErrArgCount},
		{"replicaof three", "replicaof", []string{"a", "1", "2"}, "", ErrArgCount},
		{"replicaof none", "replicaof", nil, "", ErrArgCount},
		{"replicaof port zero", "replicaof", []string{"10.0.0.1", "0"}, "", ErrInvalidValue},
		{"replicaof-cluster", "replicaof-cluster", []string{"10.0.0.1", "7000", "db2", "7001"}, "10.0.0.1 7000 db2 7001", nil},
		{"replicaof-cluster one value", "replicaof-cluster", []string{"10.0.0.1 7000 ::1 7001"}, "10.0.0.1 7000 ::1 7001", nil},
		{"replicaof-cluster empty", "replicaof-cluster", []string{""}, "", nil},
		{"replicaof-cluster odd", "replicaof-cluster", []string{"10.0.0.1", "7000", "db2"}, "", ErrArgCount},
		{"replicaof-cluster none", "replicaof-cluster", nil, "", ErrArgCount},
		{"replicaof-cluster port zero", "replicaof-cluster", []string{"10.0.0.1", "0"}, "", ErrInvalidValue},
		{"replicaof-cluster bad host", "replicaof-cluster", []string{"a b", "1"}, "", ErrInvalidValue},
		{"replicaof-cluster too many", "replicaof-cluster", slices.Repeat([]string{"h", "1"}, MaxClusterSeeds+1), "", ErrInvalidValue},
		{"cluster-shard slot", "cluster-shard", []string{"16383"}, "16383", nil},
		{"cluster-shard id", "cluster-shard", []string{"07c37dfeb235213a872192d90877d0cd55635b91"}, "07c37dfeb235213a872192d90877d0cd55635b91", nil},
		{"cluster-shard slot too big", "cluster-shard", []string{"16384"}, "", ErrInvalidValue},
		{"cluster-shard short id", "cluster-shard", []string{"07c37dfe"}, "", ErrInvalidValue},
		{"cluster-refresh-interval", "cluster-refresh-interval", []string{"100"}, "100", nil},
		{"cluster-refresh-interval too small", "cluster-refresh-interval", []string{"99"}, "", ErrInvalidValue},
		{"replicaof port too big", "replicaof", []string{"10.0.0.1", "65536"}, "", ErrInvalidValue},
		{"replicaof port word", "replicaof", []string{"10.0.0.1", "redis"}, "", ErrInvalidValue},
		{"replicaof bad host", "replicaof", []string{"a b", "1"}, "", ErrInvalidValue},
		{"replicaof empty host", "replicaof", []string{"", "1"}, "", ErrInvalidValue},

		{"snapshot-from", "snapshot-from", []string{"10.0.0.2", "6379"}, "10.0.0.2 6379", nil},
		{"snapshot-from one value", "snapshot-from", []string{"replica-1.example 6380"}, "replica-1.example 6380", nil},
		{"snapshot-from ipv6", "snapshot-from", []string{"::1", "6379"}, "::1 6379", nil},
		{"snapshot-from port max", "snapshot-from", []string{"10.0.0.2", "65535"}, "10.0.0.2 65535", nil},
		{"snapshot-from primary", "snapshot-from", []string{"primary"}, "primary", nil},
		{"snapshot-from PRIMARY", "snapshot-from", []string{"PRIMARY"}, "primary", nil},
		{"snapshot-from Primary", "snapshot-from", []string{"Primary"}, "primary", nil},
		{"snapshot-from primary as one padded value", "snapshot-from", []string{"  primary "}, "primary", nil},
		{"snapshot-from empty", "snapshot-from", []string{""}, "primary", nil},
		{"snapshot-from host named primary", "snapshot-from", []string{"primary", "6379"}, "primary 6379", nil},
		{"snapshot-from host only", "snapshot-from", []string{"10.0.0.2"}, "", ErrArgCount},
		{"snapshot-from other word", "snapshot-from", []string{"replica"}, "", ErrArgCount},
		{"snapshot-from primary and more", "snapshot-from", []string{"primary", "6379", "x"}, "", ErrArgCount},
		{"snapshot-from three", "snapshot-from", []string{"a", "1", "2"}, "", ErrArgCount},
		{"snapshot-from three as one value", "snapshot-from", []string{"a 1 2"}, "", ErrArgCount},
		{"snapshot-from none", "snapshot-from", nil, "", ErrArgCount},
		{"snapshot-from blanks", "snapshot-from", []string{"   "}, "", ErrArgCount},
		{"snapshot-from two empty", "snapshot-from", []string{"", ""}, "", ErrInvalidValue},
		{"snapshot-from port zero", "snapshot-from", []string{"10.0.0.2", "0"}, "", ErrInvalidValue},
		{"snapshot-from port too big", "snapshot-from", []string{"10.0.0.2", "65536"}, "", ErrInvalidValue},
		{"snapshot-from port negative", "snapshot-from", []string{"10.0.0.2", "-1"}, "", ErrInvalidValue},
		{"snapshot-from port word", "snapshot-from", []string{"10.0.0.2", "redis"}, "", ErrInvalidValue},
		{"snapshot-from port unit", "snapshot-from", []string{"10.0.0.2", "6k"}, "", ErrInvalidValue},
		{"snapshot-from bad host", "snapshot-from", []string{"a b", "1"}, "", ErrInvalidValue},
		{"snapshot-from bad ip", "snapshot-from", []string{"::1x", "1"}, "", ErrInvalidValue},
		{"snapshot-from empty host", "snapshot-from", []string{"", "1"}, "", ErrInvalidValue},
		{"snapshot-from unbalanced", "snapshot-from", []string{`"10.0.0.2 6379`}, "", ErrUnbalancedQuotes},
		{"snapshot-from-fallback no", "snapshot-from-fallback", []string{"NO"}, "no", nil},
		{"snapshot-from-fallback yes", "snapshot-from-fallback", []string{"yes"}, "yes", nil},
		{"snapshot-from-fallback bad", "snapshot-from-fallback", []string{"primary"}, "", ErrInvalidValue},
		{"snapshot-from-fallback two", "snapshot-from-fallback", []string{"yes", "no"}, "", ErrArgCount},

		{"masterauth", "masterauth", []string{"s3cret"}, "s3cret", nil},
		{"masterauth spaces", "masterauth", []string{"a b"}, "a b", nil},
		{"masterauth empty", "masterauth", []string{""}, "", nil},
		{"masterauth two", "masterauth", []string{"a", "b"}, "", ErrArgCount},
		{"masteruser", "masteruser", []string{"proxy"}, "proxy", nil},
		{"masteruser two", "masteruser", []string{"a", "b"}, "", ErrArgCount},
		{"bind-source-addr", "bind-source-addr", []string{"10.0.0.5"}, "10.0.0.5", nil},
		{"bind-source-addr ipv6", "bind-source-addr", []string{"2001:db8::5"}, "2001:db8::5", nil},
		{"bind-source-addr zone", "bind-source-addr", []string{"fe80::1%eth0"}, "fe80::1%eth0", nil},
		{"bind-source-addr host name", "bind-source-addr", []string{"proxy-1.example"}, "proxy-1.example", nil},
		{"bind-source-addr empty", "bind-source-addr", []string{""}, "", nil},
		{"bind-source-addr with port", "bind-source-addr", []string{"10.0.0.5:7000"}, "", ErrInvalidValue},
		{"bind-source-addr host with port", "bind-source-addr", []string{"proxy-1:7000"}, "", ErrInvalidValue},
		{"bind-source-addr bracketed", "bind-source-addr", []string{"[::1]:7000"}, "", ErrInvalidValue},
		{"bind-source-addr space", "bind-source-addr", []string{"10.0.0.5 10.0.0.6"}, "", ErrInvalidValue},
		{"bind-source-addr bad ip", "bind-source-addr", []string{"::1x"}, "", ErrInvalidValue},
		{"bind-source-addr wildcard", "bind-source-addr", []string{"*"}, "", ErrInvalidValue},
		{"bind-source-addr dash", "bind-source-addr", []string{"-10.0.0.5"}, "", ErrInvalidValue},
		{"bind-source-addr two", "bind-source-addr", []string{"10.0.0.5", "10.0.0.6"}, "", ErrArgCount},
		{"bind-source-addr none", "bind-source-addr", nil, "", ErrArgCount},
		{"requirepass", "requirepass", []string{"foobared"}, "foobared", nil},
		{"requirepass empty", "requirepass", []string{""}, "", nil},
		{"requirepass none", "requirepass", nil, "", ErrArgCount},

		{"repl-link-sync-rate-limit", "repl-link-sync-rate-limit", []string{"12mb"}, "12582912", nil},
		{"repl-link-sync-rate-limit off", "repl-link-sync-rate-limit", []string{"0"}, "0", nil},
		{"repl-link-sync-rate-limit negative", "repl-link-sync-rate-limit", []string{"-1"}, "", ErrInvalidValue},
		{"repl-link-sync-rate-limit word", "repl-link-sync-rate-limit", []string{"fast"}, "", ErrInvalidValue},
		{"repl-read-coalesce-usec", "repl-read-coalesce-usec", []string{"2500"}, "2500", nil},
		{"repl-link-compression-coalesce-usec", "repl-link-compression-coalesce-usec", []string{"2000"}, "2000", nil},
		{"repl-link-compression-coalesce-usec off", "repl-link-compression-coalesce-usec", []string{"0"}, "0", nil},
		{"repl-link-compression-coalesce-usec most", "repl-link-compression-coalesce-usec", []string{"100000"}, "100000", nil},
		{"repl-link-compression-coalesce-usec too long", "repl-link-compression-coalesce-usec", []string{"100001"}, "", ErrInvalidValue},
		{"repl-link-compression-coalesce-usec negative", "repl-link-compression-coalesce-usec", []string{"-1"}, "", ErrInvalidValue},
		{"repl-read-coalesce-usec off", "repl-read-coalesce-usec", []string{"0"}, "0", nil},
		{"repl-read-coalesce-usec most", "repl-read-coalesce-usec", []string{"100000"}, "100000", nil},
		{"repl-read-coalesce-usec too long", "repl-read-coalesce-usec", []string{"100001"}, "", ErrInvalidValue},
		{"repl-read-coalesce-usec negative", "repl-read-coalesce-usec", []string{"-1"}, "", ErrInvalidValue},
		{"repl-read-coalesce-usec unit", "repl-read-coalesce-usec", []string{"1ms"}, "", ErrInvalidValue},

		{"repl-log-size", "repl-log-size", []string{"2gb"}, "2147483648", nil},
		{"repl-log-window", "repl-log-window", []string{"256mb"}, "268435456", nil},
		{"repl-log-window too small", "repl-log-window", []string{"1mb"}, "", ErrInvalidValue},
		{"repl-log-size off", "repl-log-size", []string{"0"}, "0", nil},
		{"repl-log-size negative", "repl-log-size", []string{"-1"}, "", ErrInvalidValue},
		{"repl-log-fsync always", "repl-log-fsync", []string{"Always"}, "always", nil},
		{"repl-log-fsync no", "repl-log-fsync", []string{"no"}, "no", nil},
		{"repl-log-fsync bad", "repl-log-fsync", []string{"sometimes"}, "", ErrInvalidValue},
		{"repl-link-compression zstd", "repl-link-compression", []string{"ZSTD"}, "zstd", nil},
		{"repl-link-compression no", "repl-link-compression", []string{"no"}, "no", nil},
		{"repl-link-compression bad", "repl-link-compression", []string{"lz4"}, "", ErrInvalidValue},
		{"repl-link-compression-allow no", "repl-link-compression-allow", []string{"no"}, "no", nil},
		{"repl-link-compression-allow bad", "repl-link-compression-allow", []string{"maybe"}, "", ErrInvalidValue},
		{"repl-link-compression-max-links", "repl-link-compression-max-links", []string{"4"}, "4", nil},
		{"repl-link-compression-max-links no cap", "repl-link-compression-max-links", []string{"0"}, "0", nil},
		{"repl-link-compression-max-links most", "repl-link-compression-max-links", []string{"4294967295"}, "4294967295", nil},
		{"repl-link-compression-max-links too many", "repl-link-compression-max-links", []string{"4294967296"}, "", ErrInvalidValue},
		{"repl-link-compression-max-links negative", "repl-link-compression-max-links", []string{"-1"}, "", ErrInvalidValue},
		{"repl-link-compression-max-links word", "repl-link-compression-max-links", []string{"many"}, "", ErrInvalidValue},
		{"repl-link-compression-max-links unit", "repl-link-compression-max-links", []string{"1k"}, "", ErrInvalidValue},
		{"repl-backlog-size mb", "repl-backlog-size", []string{"1mb"}, "1048576", nil},
		{"repl-backlog-size gb", "repl-backlog-size", []string{"1GB"}, "1073741824", nil},
		{"repl-backlog-size clamped", "repl-backlog-size", []string{"100"}, "16384", nil},
		{"repl-backlog-size clamped unit", "repl-backlog-size", []string{"1kb"}, "16384", nil},
		{"repl-backlog-size just above", "repl-backlog-size", []string{"16385"}, "16385", nil},
		{"repl-backlog-size max", "repl-backlog-size", []string{"9223372036854775807"}, "9223372036854775807", nil},
		{"repl-backlog-size overflow", "repl-backlog-size", []string{"9223372036854775808"}, "", ErrInvalidValue},
		{"repl-backlog-size zero", "repl-backlog-size", []string{"0"}, "", ErrInvalidValue},
		{"repl-backlog-size negative", "repl-backlog-size", []string{"-1"}, "", ErrInvalidValue},

		{"repl-timeout", "repl-timeout", []string{"30"}, "30", nil},
		{"repl-timeout one", "repl-timeout", []string{"1"}, "1", nil},
		{"repl-timeout max", "repl-timeout", []string{"2147483647"}, "2147483647", nil},
		{"repl-timeout zero", "repl-timeout", []string{"0"}, "", ErrInvalidValue},
		{"repl-timeout too big", "repl-timeout", []string{"2147483648"}, "", ErrInvalidValue},
		{"repl-timeout unit", "repl-timeout", []string{"60s"}, "", ErrInvalidValue},
		{"shutdown-timeout", "shutdown-timeout", []string{"30"}, "30", nil},
		{"shutdown-timeout zero", "shutdown-timeout", []string{"0"}, "0", nil},
		{"shutdown-timeout negative", "shutdown-timeout", []string{"-1"}, "", ErrInvalidValue},
		{"metrics-port", "metrics-port", []string{"9121"}, "9121", nil},
		{"metrics-port too big", "metrics-port", []string{"65536"}, "", ErrInvalidValue},
		{"metrics-bind", "metrics-bind", []string{"0.0.0.0"}, "0.0.0.0", nil},
		{"metrics-bind optional", "metrics-bind", []string{"-::1"}, "", ErrInvalidValue},
		{"metrics-tls", "metrics-tls", []string{"YES"}, "yes", nil},
		{"metrics-tls bad", "metrics-tls", []string{"https"}, "", ErrInvalidValue},
		{"metrics-web-config", "metrics-web-config", []string{"/etc/replproxy/web config.yml"}, "/etc/replproxy/web config.yml", nil},
		{"metrics-web-config empty", "metrics-web-config", []string{""}, "", nil},
		{"metrics-web-config NUL", "metrics-web-config", []string{"a\x00b"}, "", ErrInvalidValue},
		{"metrics-web-config two", "metrics-web-config", []string{"a", "b"}, "", ErrArgCount},

		{"ack-policy received", "ack-policy", []string{"received"}, "received", nil},
		{"ack-policy received case", "ack-policy", []string{"RECEIVED"}, "received", nil},
		{"ack-policy replicas words", "ack-policy", []string{"replicas", "2"}, "replicas 2", nil},
		{"ack-policy replicas one value", "ack-policy", []string{"Replicas 3"}, "replicas 3", nil},
		{"ack-policy replicas zero", "ack-policy", []string{"replicas", "0"}, "", ErrInvalidValue},
		{"ack-policy replicas negative", "ack-policy", []string{"replicas", "-1"}, "", ErrInvalidValue},
		{"ack-policy replicas no count", "ack-policy", []string{"replicas"}, "", ErrInvalidValue},
		{"ack-policy received count", "ack-policy", []string{"received", "2"}, "", ErrInvalidValue},
		{"ack-policy unknown", "ack-policy", []string{"all"}, "", ErrInvalidValue},
		{"ack-policy too many", "ack-policy", []string{"replicas", "2", "3"}, "", ErrArgCount},
		{"ack-policy empty", "ack-policy", []string{""}, "", ErrInvalidValue},

		{"tls-port", "tls-port", []string{"6380"}, "6380", nil},
		{"tls-port too big", "tls-port", []string{"65536"}, "", ErrInvalidValue},
		{"tls-cert-file", "tls-cert-file", []string{"/etc/redis/a b.crt"}, "/etc/redis/a b.crt", nil},
		{"tls-ca-cert-dir empty", "tls-ca-cert-dir", []string{""}, "", nil},
		{"tls-auth-clients optional", "tls-auth-clients", []string{"OPTIONAL"}, "optional", nil},
		{"tls-auth-clients bad", "tls-auth-clients", []string{"maybe"}, "", ErrInvalidValue},
		{"tls-replication", "tls-replication", []string{"yes"}, "yes", nil},
		{"tls-replication bad", "tls-replication", []string{"1"}, "", ErrInvalidValue},
		{"tls-protocols", "tls-protocols", []string{"TLSv1.2 TLSv1.3"}, "TLSv1.2 TLSv1.3", nil},
		{"tls-protocols case", "tls-protocols", []string{"tlsv1.3"}, "tlsv1.3", nil},
		{"tls-protocols old", "tls-protocols", []string{"TLSv1 TLSv1.1 TLSv1.2"}, "TLSv1 TLSv1.1 TLSv1.2", nil},
		{"tls-protocols gap", "tls-protocols", []string{"TLSv1.1 TLSv1.3"}, "", ErrInvalidValue},
		{"tls-protocols unknown", "tls-protocols", []string{"SSLv3"}, "", ErrInvalidValue},
		{"tls-protocols blank", "tls-protocols", []string{" "}, "", ErrInvalidValue},
		{"tls-ciphers openssl", "tls-ciphers", []string{"ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305"}, "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305", nil},
		{"tls-ciphers iana", "tls-ciphers", []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", nil},
		{"tls-ciphers expression", "tls-ciphers", []string{"DEFAULT:!MEDIUM"}, "", ErrInvalidValue},
		{"tls-ciphers insecure", "tls-ciphers", []string{"AES128-SHA"}, "", ErrInvalidValue},
		{"tls-ciphers tls13 suite", "tls-ciphers", []string{"TLS_AES_128_GCM_SHA256"}, "", ErrInvalidValue},
		{"tls-ciphersuites all", "tls-ciphersuites", []string{"TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256:TLS_AES_128_CCM_SHA256"}, "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256:TLS_AES_128_CCM_SHA256", nil},
		{"tls-ciphersuites subset", "tls-ciphersuites", []string{"TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"}, "", ErrInvalidValue},
		{"tls-ciphersuites unknown", "tls-ciphersuites", []string{"ECDHE-RSA-AES128-GCM-SHA256"}, "", ErrInvalidValue},

		{"output replica", "client-output-buffer-limit", []string{"replica 1mb 2mb 3"},
			"normal 0 0 0 slave 1048576 2097152 3 pubsub 33554432 8388608 60", nil},
		{"output slave words", "client-output-buffer-limit", []string{"slave", "1", "2", "3"},
			"normal 0 0 0 slave 1 2 3 pubsub 33554432 8388608 60", nil},
		{"output class case", "client-output-buffer-limit", []string{"REPLICA 1 2 3"},
			"normal 0 0 0 slave 1 2 3 pubsub 33554432 8388608 60", nil},
		{"output all classes", "client-output-buffer-limit", []string{"normal 1k 2k 3 replica 4kb 5kb 6 pubsub 7 8 9"},
			"normal 1000 2000 3 slave 4096 5120 6 pubsub 7 8 9", nil},
		{"output same class twice", "client-output-buffer-limit", []string{"pubsub 1 1 1 pubsub 2 2 2"},
			"normal 0 0 0 slave 268435456 67108864 60 pubsub 2 2 2", nil},
		{"output nothing", "client-output-buffer-limit", nil,
			"normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60", nil},
		{"output master", "client-output-buffer-limit", []string{"master 1 2 3"}, "", ErrInvalidValue},
		{"output unknown class", "client-output-buffer-limit", []string{"replicas 1 2 3"}, "", ErrInvalidValue},
		{"output three", "client-output-buffer-limit", []string{"normal 1 2"}, "", ErrArgCount},
		{"output five", "client-output-buffer-limit", []string{"normal 1 2 3 4"}, "", ErrArgCount},
		{"output empty", "client-output-buffer-limit", []string{""}, "", ErrArgCount},
		{"output negative seconds", "client-output-buffer-limit", []string{"pubsub 1 2 -1"}, "", ErrInvalidValue},
		{"output negative hard", "client-output-buffer-limit", []string{"pubsub -1 2 1"}, "", ErrInvalidValue},
		{"output bad soft", "client-output-buffer-limit", []string{"pubsub 1 2x 1"}, "", ErrInvalidValue},
		{"output bad seconds", "client-output-buffer-limit", []string{"pubsub 1 2 x"}, "", ErrInvalidValue},
		{"output all or nothing", "client-output-buffer-limit", []string{"normal 1 2 3 master 1 2 3"}, "", ErrInvalidValue},

		{"maxmemory", "maxmemory", []string{"100mb"}, "104857600", nil},
		{"maxmemory zero", "maxmemory", []string{"0"}, "0", nil},
		{"maxmemory k", "maxmemory", []string{"1k"}, "1000", nil},
		{"maxmemory negative", "maxmemory", []string{"-1"}, "", ErrInvalidValue},
		{"maxmemory negative zero", "maxmemory", []string{"-0"}, "", ErrInvalidValue},
		{"maxmemory fraction", "maxmemory", []string{"1.5gb"}, "", ErrInvalidValue},
		{"maxmemory empty", "maxmemory", []string{""}, "", ErrInvalidValue},
		{"maxmemory overflow", "maxmemory", []string{"17179869184gb"}, "", ErrInvalidValue},

		{"policy noeviction", "maxmemory-policy", []string{"noeviction"}, "noeviction", nil},
		{"policy evict-snapshots", "maxmemory-policy", []string{"EVICT-SNAPSHOTS"}, "evict-snapshots", nil},
		{"policy redis-only", "maxmemory-policy", []string{"allkeys-lru"}, "", ErrInvalidValue},

		{"maxclients", "maxclients", []string{"1"}, "1", nil},
		{"maxclients max", "maxclients", []string{"4294967295"}, "4294967295", nil},
		{"maxclients zero", "maxclients", []string{"0"}, "", ErrInvalidValue},
		{"maxclients too big", "maxclients", []string{"4294967296"}, "", ErrInvalidValue},

		{"protected-mode no", "protected-mode", []string{"NO"}, "no", nil},
		{"protected-mode yes", "protected-mode", []string{"yes"}, "yes", nil},
		{"protected-mode bad", "protected-mode", []string{"on"}, "", ErrInvalidValue},
		{"query limit", "client-query-buffer-limit", []string{"2gb"}, "2147483648", nil},
		{"query limit min", "client-query-buffer-limit", []string{"1mb"}, "1048576", nil},
		{"query limit too small", "client-query-buffer-limit", []string{"1048575"}, "", ErrInvalidValue},
		{"max bulk", "proto-max-bulk-len", []string{"1mb"}, "1048576", nil},
		{"max bulk too small", "proto-max-bulk-len", []string{"1000000"}, "", ErrInvalidValue},
		{"max bulk negative", "proto-max-bulk-len", []string{"-1"}, "", ErrInvalidValue},
		{"master query limit", "master-query-buffer-limit", []string{"2mb"}, "2097152", nil},
		{"master query limit too small", "master-query-buffer-limit", []string{"1000000"}, "", ErrInvalidValue},

		{"dir", "dir", []string{"/var/lib/replproxy"}, "/var/lib/replproxy", nil},
		{"dir empty", "dir", []string{""}, "", ErrInvalidValue},

		{"loglevel debug", "loglevel", []string{"debug"}, "debug", nil},
		{"loglevel verbose", "loglevel", []string{"verbose"}, "verbose", nil},
		{"loglevel notice", "loglevel", []string{"Notice"}, "notice", nil},
		{"loglevel warning", "loglevel", []string{"WARNING"}, "warning", nil},
		{"loglevel nothing", "loglevel", []string{"nothing"}, "nothing", nil},
		{"loglevel bad", "loglevel", []string{"info"}, "", ErrInvalidValue},

		{"logfile", "logfile", []string{"/var/log/replproxy.log"}, "/var/log/replproxy.log", nil},
		{"logfile stderr", "logfile", []string{""}, "", nil},

		{"log-format json", "log-format", []string{"json"}, "json", nil},
		{"log-format text", "log-format", []string{"TEXT"}, "text", nil},
		{"log-format bad", "log-format", []string{"logfmt"}, "", ErrInvalidValue},
		{"supervised systemd", "supervised", []string{"systemd"}, "systemd", nil},
		{"supervised auto case", "supervised", []string{"AUTO"}, "auto", nil},
		{"supervised upstart", "supervised", []string{"upstart"}, "", ErrInvalidValue},

		{"directive case", "MaxMemory", []string{"1"}, "1", nil},
		{"unknown", "save", []string{""}, "", ErrUnknownDirective},
		{"include", "include", []string{"x.conf"}, "", ErrUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			err := c.Set(tc.directive, tc.args...)
			if tc.err != nil {
				ce := checkError(t, err, tc.err)
				if ce.Directive != strings.ToLower(tc.directive) || ce.File != "" || ce.Line != 0 {
					t.Fatalf("error names %q at %q:%d (%v)", ce.Directive, ce.File, ce.Line, err)
				}
				if !reflect.DeepEqual(c, DefaultConfig()) {
					t.Fatalf("failed Set changed the config: %+v", c)
				}
				return
			}
			if err != nil {
				t.Fatalf("Set(%q, %q): %v", tc.directive, tc.args, err)
			}
			if got, ok := c.Get(tc.directive); !ok || got != tc.want {
				t.Fatalf("Get(%q) = %q, %v; want %q", tc.directive, got, ok, tc.want)
			}
		})
	}
}

// TestSetFields checks that directives land in the documented fields.
func TestSetFields(t *testing.T) {
	c := DefaultConfig()
	for _, set := range [][]string{
		{"port", "7000"},
		{"bind", "10.0.0.1", "-::1"},
		{"replicaof", "10.0.0.2", "6380"},
		{"snapshot-from", "10.0.0.3", "6381"},
		{"snapshot-from-fallback", "no"},
		{"replicaof-cluster", "10.0.1.1", "7000", "::1", "7001"},
		{"cluster-shard", "42"},
		{"cluster-refresh-interval", "500"},
		{"aclfile", "/etc/users.acl"},
		{"acllog-max-len", "7"},
		{"masterauth", "pw"},
		{"masteruser", "user"},
		{"bind-source-addr", "10.0.0.9"},
		{"requirepass", "rp"},
		{"protected-mode", "no"},
		{"client-query-buffer-limit", "2mb"},
		{"proto-max-bulk-len", "3mb"},
		{"master-query-buffer-limit", "4mb"},
		{"repl-backlog-size", "64mb"},
		{"repl-timeout", "5"},
		{"repl-read-coalesce-usec", "250"},
		{"repl-link-compression-coalesce-usec", "2000"},
		{"shutdown-timeout", "0"},
		{"client-output-buffer-limit", "normal 1 2 3 replica 4 5 6 pubsub 7 8 9"},
		{"maxmemory", "2gb"},
		{"maxmemory-policy", "evict-snapshots"},
		{"maxclients", "99"},
		{"dir", "/d"},
		{"loglevel", "debug"},
		{"logfile", "/l"},
		{"log-format", "json"},
		{"supervised", "systemd"},
		{"metrics-port", "9121"},
		{"metrics-bind", "::1"},
		{"metrics-tls", "yes"},
		{"metrics-web-config", "/w.yml"},
		{"repl-log-size", "64mb"},
		{"repl-log-fsync", "always"},
		{"repl-log-window", "32mb"},
		{"repl-link-compression", "zstd"},
		{"repl-link-compression-allow", "no"},
		{"repl-link-compression-max-links", "3"},
		{"tls-port", "7001"},
		{"tls-cert-file", "/c"},
		{"tls-key-file", "/k"},
		{"tls-client-cert-file", "/cc"},
		{"tls-client-key-file", "/ck"},
		{"tls-ca-cert-file", "/ca"},
		{"tls-ca-cert-dir", "/cad"},
		{"tls-auth-clients", "optional"},
		{"tls-replication", "yes"},
		{"tls-protocols", "TLSv1.2 TLSv1.3"},
		{"tls-ciphers", "ECDHE-RSA-AES128-GCM-SHA256"},
		{"tls-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384"},
	} {
		if err := c.Set(set[0], set[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	want := &Config{
		Port:                        7000,
		Bind:                        []string{"10.0.0.1", "-::1"},
		MasterHost:                  "10.0.0.2",
		MasterPort:                  6380,
		SnapshotFromHost:            "10.0.0.3",
		SnapshotFromPort:            6381,
		ACLFile:                     "/etc/users.acl",
		ACLLogMaxLen:                7,
		MasterAuth:                  "pw",
		MasterUser:                  "user",
		BindSourceAddr:              "10.0.0.9",
		RequirePass:                 "rp",
		ReplBacklogSize:             64 << 20,
		ReplReadCoalesce:            250 * time.Microsecond,
		ReplLinkCompressionCoalesce: 2 * time.Millisecond,

		ClientQueryBufferLimit: 2 << 20,
		ProtoMaxBulkLen:        3 << 20,
		MasterQueryBufferLimit: 4 << 20,
		ReplTimeout:            5 * time.Second,
		ShutdownTimeout:        0,
		ClientOutputBufferLimit: OutputBufferLimits{
			Normal:  OutputBufferLimit{1, 2, 3 * time.Second},
			Replica: OutputBufferLimit{4, 5, 6 * time.Second},
			PubSub:  OutputBufferLimit{7, 8, 9 * time.Second},
		},
		MaxMemory:        2 << 30,
		MaxMemoryPolicy:  eviction.EvictSnapshots,
		MaxClients:       99,
		Dir:              "/d",
		LogLevel:         LogDebug,
		LogFile:          "/l",
		LogFormat:        LogJSON,
		Supervised:       SupervisedSystemd,
		MetricsPort:      9121,
		MetricsBind:      "::1",
		MetricsTLS:       true,
		MetricsWebConfig: "/w.yml",
		ReplLogSize:      64 << 20,
		ReplLogFsync:     FsyncAlways,
		ReplLogWindow:    32 << 20,

		ReplLinkCompression:         LinkCompressionZstd,
		ReplLinkCompressionAllow:    false,
		ReplLinkCompressionMaxLinks: 3,

		TLSPort:           7001,
		TLSCertFile:       "/c",
		TLSKeyFile:        "/k",
		TLSClientCertFile: "/cc",
		TLSClientKeyFile:  "/ck",
		TLSCACertFile:     "/ca",
		TLSCACertDir:      "/cad",
		TLSAuthClients:    TLSAuthOptional,
		TLSReplication:    true,
		TLSProtocols:      "TLSv1.2 TLSv1.3",
		TLSCiphers:        "ECDHE-RSA-AES128-GCM-SHA256",
		TLSCiphersuites:   "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384",

		ClusterSeeds:           []HostPort{{"10.0.1.1", 7000}, {"::1", 7001}},
		ClusterShard:           "42",
		ClusterRefreshInterval: 500 * time.Millisecond,
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	checkRoundTrip(t, c)
}

// TestGetDefaults pins CONFIG GET of the defaults. For directives shared
// with Redis the strings are what redis-server 7.0.15 answers.
func TestGetDefaults(t *testing.T) {
	c := DefaultConfig()
	for _, tc := range []struct{ name, want string }{
		{"port", "6379"},
		{"bind", "127.0.0.1"},
		{"replicaof", ""},
		{"slaveof", ""},
		{"masterauth", ""},
		{"masteruser", ""},
		{"bind-source-addr", ""},
		{"requirepass", ""},
		{"protected-mode", "yes"},
		{"client-query-buffer-limit", "1073741824"},
		{"proto-max-bulk-len", "536870912"},
		{"master-query-buffer-limit", "1073741824"},
		{"repl-backlog-size", "1048576"},
		{"repl-timeout", "60"},
		{"client-output-buffer-limit", "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"},
		{"maxmemory", "0"},
		{"maxmemory-policy", "noeviction"},
		{"maxclients", "10000"},
		{"dir", "."},
		{"loglevel", "notice"},
		{"logfile", ""},
		{"log-format", "text"},
		{"supervised", "no"},
		{"ack-policy", "received"},
		{"snapshot-from", "primary"},
		{"snapshot-from-fallback", "yes"},
		{"aclfile", ""},
		{"acllog-max-len", "128"},
		{"metrics-port", "0"},
		{"repl-log-size", "1073741824"},
		{"repl-log-fsync", "everysec"},
		{"repl-log-window", "67108864"},
		{"repl-link-compression", "no"},
		{"repl-link-compression-allow", "yes"},
		{"repl-link-compression-max-links", "16"},
		{"metrics-bind", "127.0.0.1"},
		{"metrics-tls", "no"},
		{"metrics-web-config", ""},
		// What redis-server 7.0.15 answers (its other tls-* are not served).
		{"tls-port", "0"},
		{"tls-cert-file", ""},
		{"tls-key-file", ""},
		{"tls-client-cert-file", ""},
		{"tls-client-key-file", ""},
		{"tls-ca-cert-file", ""},
		{"tls-ca-cert-dir", ""},
		{"tls-auth-clients", "yes"},
		{"tls-replication", "no"},
		{"tls-protocols", ""},
		{"tls-ciphers", ""},
		{"tls-ciphersuites", ""},
		{"REPL-TIMEOUT", "60"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := c.Get(tc.name); !ok || got != tc.want {
				t.Fatalf("Get(%q) = %q, %v; want %q", tc.name, got, ok, tc.want)
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		if got, ok := c.Get("save"); ok || got != "" {
			t.Fatalf("Get(save) = %q, %v", got, ok)
		}
	})
}

func TestGetRoundsSecondsUp(t *testing.T) {
	c := DefaultConfig()
	c.ReplTimeout = 1500 * time.Millisecond
	c.ClientOutputBufferLimit.Replica.SoftPeriod = time.Nanosecond
	for _, tc := range []struct{ name, want string }{
		{"repl-timeout", "2"},
		{"client-output-buffer-limit", "normal 0 0 0 slave 268435456 67108864 1 pubsub 33554432 8388608 60"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := c.Get(tc.name); got != tc.want {
				t.Fatalf("Get(%q) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
}

func TestNames(t *testing.T) {
	want := []string{
		"ack-policy", "aclfile", "acllog-max-len", "backup-max-stream-since", "bind", "bind-source-addr", "client-output-buffer-limit", "client-query-buffer-limit", "cluster-port-base", "cluster-refresh-interval", "cluster-shard", "dir", "log-format",
		"logfile", "loglevel", "master-query-buffer-limit", "masterauth", "masteruser", "maxclients", "maxmemory",
		"maxmemory-policy", "metrics-bind", "metrics-port", "metrics-tls", "metrics-web-config", "port", "protected-mode", "proto-max-bulk-len",
		"repl-backlog-size", "repl-link-compression", "repl-link-compression-allow", "repl-link-compression-coalesce-usec", "repl-link-compression-max-links", "repl-link-sync-rate-limit", "repl-log-fsync", "repl-log-size", "repl-log-window", "repl-read-coalesce-usec", "repl-snapshot-max-stream-since", "repl-snapshot-refresh", "repl-timeout", "replicaof", "replicaof-cluster", "requirepass", "shutdown-timeout", "snapshot-from", "snapshot-from-fallback", "supervised",
		"tls-auth-clients", "tls-ca-cert-dir", "tls-ca-cert-file", "tls-cert-file", "tls-ciphers",
		"tls-ciphersuites", "tls-client-cert-file", "tls-client-key-file", "tls-key-file", "tls-port",
		"tls-protocols", "tls-replication",
	}
	got := Names()
	if !slices.Equal(got, want) {
		t.Fatalf("Names() = %q\nwant %q", got, want)
	}
	got[0] = "changed"
	if Names()[0] != want[0] {
		t.Fatal("Names returns shared state")
	}
}

func TestMutable(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"port", true},
		{"bind", true},
		{"dir", true},
		{"logfile", false},
		{"log-format", false},
		{"supervised", false},
		{"metrics-port", false},
		{"metrics-bind", false},
		{"metrics-tls", false},
		{"metrics-web-config", false},
		{"tls-port", true},
		{"repl-log-size", false},
		{"tls-cert-file", true},
		{"tls-key-file", true},
		{"tls-ca-cert-file", true},
		{"tls-auth-clients", true},
		{"tls-replication", true},
		{"tls-protocols", true},
		{"loglevel", true},
		{"repl-backlog-size", true},
		{"repl-timeout", true},
		{"maxmemory", true},
		{"maxmemory-policy", true},
		{"client-output-buffer-limit", true},
		{"masterauth", true},
		{"masteruser", true},
		{"bind-source-addr", true},
		{"requirepass", true},
		{"maxclients", true},
		{"protected-mode", true},
		{"client-query-buffer-limit", true},
		{"proto-max-bulk-len", true},
		{"master-query-buffer-limit", true},
		{"replicaof", true},
		{"slaveof", true},
		{"snapshot-from", true},
		{"snapshot-from-fallback", true},
		{"acllog-max-len", true},
		{"aclfile", false},
		{"user", false},
		{"LogLevel", true},
		{"save", false},
		{"", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Mutable(tc.name); got != tc.want {
				t.Fatalf("Mutable(%q) = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
	}{
		{"defaults", ""},
		{"example", "port 0\nbind * -::* localhost\nreplicaof ::1 7000\nmasteruser u\nmasterauth \"a b\\\"c\"\n" +
			"requirepass ''\nrepl-backlog-size 20000\nrepl-timeout 9\n" +
			"client-output-buffer-limit normal 1 2 3 slave 0 0 0 pubsub 5gb 6mb 2147483647\n" +
			"maxmemory 9223372036854775807\nmaxmemory-policy evict-snapshots\nmaxclients 4294967295\n" +
			"dir \"/a dir\"\nloglevel nothing\nlogfile \"\\x00\"\nlog-format json\n" +
			"snapshot-from fe80::1%eth0 6380\nsnapshot-from-fallback no\nbind-source-addr ::1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			if err := c.Load("t.conf", tc.text); err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			checkRoundTrip(t, c)
		})
	}
}
