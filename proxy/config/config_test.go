package config

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/eviction"
)

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	want := &Config{
		Port:            6379,
		Bind:            []string{"127.0.0.1"},
		ProtectedMode:   true,
		ReplBacklogSize: 1048576,
		ReplTimeout:     time.Minute,
		ShutdownTimeout: 10 * time.Second,
		ReplLogSize:     1 << 30,
		ReplLogFsync:    FsyncEverySec,
		ReplLogWindow:   64 << 20,

		SnapshotFromFallback: true,
		ACLLogMaxLen:         128,

		ClusterRefreshInterval: 2 * time.Second,

		ClientOutputBufferLimit: OutputBufferLimits{
			Replica: OutputBufferLimit{Hard: 268435456, Soft: 67108864, SoftPeriod: time.Minute},
			PubSub:  OutputBufferLimit{Hard: 33554432, Soft: 8388608, SoftPeriod: time.Minute},
		},
		MaxMemoryPolicy: eviction.NoEviction,
		MaxClients:      10000,
		Dir:             ".",
		LogLevel:        LogNotice,
		LogFormat:       LogText,
		Supervised:      SupervisedNo,
		MetricsBind:     "127.0.0.1",
		TLSAuthClients:  TLSAuthYes,

		ReplLinkCompression:         LinkCompressionNo,
		ReplLinkCompressionAllow:    true,
		ReplLinkCompressionMaxLinks: 16,
		ReplReadCoalesce:            0,

		ClientQueryBufferLimit: 1 << 30,
		ProtoMaxBulkLen:        512 << 20,
		MasterQueryBufferLimit: 1 << 30,
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
	if c2 := DefaultConfig(); &c2.Bind[0] == &c.Bind[0] {
		t.Fatal("DefaultConfig shares the Bind array")
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		change    func(c *Config)
		directive string // "" means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"port zero", func(c *Config) { c.Port = 0 }, ""},
		{"port negative", func(c *Config) { c.Port = -1 }, "port"},
		{"port too big", func(c *Config) { c.Port = 65536 }, "port"},
		{"bind nil", func(c *Config) { c.Bind = nil }, "bind"},
		{"bind seventeen", func(c *Config) { c.Bind = make([]string, 17) }, "bind"},
		{"bind empty address", func(c *Config) { c.Bind = []string{""} }, "bind"},
		{"bind space", func(c *Config) { c.Bind = []string{"a b"} }, "bind"},
		{"bind ipv6 zone", func(c *Config) { c.Bind = []string{"-fe80::1%lo"} }, ""},
		{"upstream", func(c *Config) { c.MasterHost, c.MasterPort = "db1", 6379 }, ""},
		{"upstream without port", func(c *Config) { c.MasterHost = "db1" }, "replicaof"},
		{"port without upstream", func(c *Config) { c.MasterPort = 6379 }, "replicaof"},
		{"upstream bad host", func(c *Config) { c.MasterHost, c.MasterPort = "db 1", 6379 }, "replicaof"},
		{"upstream port too big", func(c *Config) { c.MasterHost, c.MasterPort = "db1", 70000 }, "replicaof"},
		{"snapshot-from", func(c *Config) { c.SnapshotFromHost, c.SnapshotFromPort = "replica-1", 6379 }, ""},
		{"snapshot-from ipv6", func(c *Config) { c.SnapshotFromHost, c.SnapshotFromPort = "::1", 6379 }, ""},
		{"snapshot-from without port", func(c *Config) { c.SnapshotFromHost = "replica-1" }, "snapshot-from"},
		{"snapshot-from port without host", func(c *Config) { c.SnapshotFromPort = 6379 }, "snapshot-from"},
		{"snapshot-from bad host", func(c *Config) { c.SnapshotFromHost, c.SnapshotFromPort = "replica 1", 6379 }, "snapshot-from"},
		{"snapshot-from port too big", func(c *Config) { c.SnapshotFromHost, c.SnapshotFromPort = "replica-1", 65536 }, "snapshot-from"},
		{"snapshot-from port negative", func(c *Config) { c.SnapshotFromHost, c.SnapshotFromPort = "replica-1", -1 }, "snapshot-from"},
		{"snapshot-from-fallback off", func(c *Config) { c.SnapshotFromFallback = false }, ""},
		{"replicaof-cluster with a shard", func(c *Config) { c.ClusterSeeds, c.ClusterShard = []HostPort{{"db1", 7000}}, "0" }, ""},
		{"replicaof-cluster without a shard", func(c *Config) { c.ClusterSeeds = []HostPort{{"db1", 7000}} }, "replicaof-cluster"},
		{"cluster-shard without seeds", func(c *Config) { c.ClusterShard = "0" }, "replicaof-cluster"},
		{"replicaof-cluster bad port", func(c *Config) { c.ClusterSeeds, c.ClusterShard = []HostPort{{"db1", 0}}, "0" }, "replicaof-cluster"},
		{"cluster-shard bad", func(c *Config) { c.ClusterSeeds, c.ClusterShard = []HostPort{{"db1", 7000}}, "x" }, "cluster-shard"},
		{"cluster-shard all", func(c *Config) {
			c.ClusterSeeds, c.ClusterShard, c.ClusterPortBase, c.Port = []HostPort{{"db1", 7000}}, AllShards, 7100, 0
		}, ""},
		{"cluster-shard all without a port base", func(c *Config) {
			c.ClusterSeeds, c.ClusterShard, c.Port = []HostPort{{"db1", 7000}}, AllShards, 0
		}, "cluster-port-base"},
		{"cluster-shard all with a port", func(c *Config) {
			c.ClusterSeeds, c.ClusterShard, c.ClusterPortBase = []HostPort{{"db1", 7000}}, AllShards, 7100
		}, "port"},
		{"cluster-shard all with tls-replication", func(c *Config) {
			c.ClusterSeeds, c.ClusterShard, c.ClusterPortBase, c.Port = []HostPort{{"db1", 7000}}, AllShards, 7100, 0
			c.TLSReplication, c.TLSCertFile, c.TLSKeyFile, c.TLSCACertFile = true, "c", "k", "ca"
		}, "tls-replication"},
		{"cluster-shard all supervised", func(c *Config) {
			c.ClusterSeeds, c.ClusterShard, c.ClusterPortBase, c.Port = []HostPort{{"db1", 7000}}, AllShards, 7100, 0
			c.Supervised = SupervisedSystemd
		}, "supervised"},
		{"cluster-port-base without all", func(c *Config) {
			c.ClusterSeeds, c.ClusterShard, c.ClusterPortBase = []HostPort{{"db1", 7000}}, "0", 7100
		}, "cluster-port-base"},
		{"cluster-refresh-interval too small", func(c *Config) { c.ClusterRefreshInterval = time.Millisecond }, "cluster-refresh-interval"},
		{"masteruser without masterauth", func(c *Config) { c.MasterUser = "u" }, "masteruser"},
		{"masteruser with masterauth", func(c *Config) { c.MasterUser, c.MasterAuth = "u", "p" }, ""},
		{"masterauth alone", func(c *Config) { c.MasterAuth = "p" }, ""},
		{"bind-source-addr", func(c *Config) { c.BindSourceAddr = "10.0.0.5" }, ""},
		{"bind-source-addr host name", func(c *Config) { c.BindSourceAddr = "proxy-1" }, ""},
		{"bind-source-addr with port", func(c *Config) { c.BindSourceAddr = "10.0.0.5:7000" }, "bind-source-addr"},
		{"bind-source-addr space", func(c *Config) { c.BindSourceAddr = "proxy 1" }, "bind-source-addr"},
		{"backlog minimum", func(c *Config) { c.ReplBacklogSize = MinReplBacklogSize }, ""},
		{"backlog too small", func(c *Config) { c.ReplBacklogSize = MinReplBacklogSize - 1 }, "repl-backlog-size"},
		{"timeout sub-second", func(c *Config) { c.ReplTimeout = 100 * time.Millisecond }, ""},
		{"timeout zero", func(c *Config) { c.ReplTimeout = 0 }, "repl-timeout"},
		{"timeout huge", func(c *Config) { c.ReplTimeout = 1 << 62 }, "repl-timeout"},
		{"output hard negative", func(c *Config) { c.ClientOutputBufferLimit.Replica.Hard = -1 }, "client-output-buffer-limit"},
		{"output soft negative", func(c *Config) { c.ClientOutputBufferLimit.Normal.Soft = -1 }, "client-output-buffer-limit"},
		{"output period negative", func(c *Config) { c.ClientOutputBufferLimit.PubSub.SoftPeriod = -1 }, "client-output-buffer-limit"},
		{"maxmemory negative", func(c *Config) { c.MaxMemory = -1 }, "maxmemory"},
		{"policy empty", func(c *Config) { c.MaxMemoryPolicy = "" }, "maxmemory-policy"},
		{"policy unknown", func(c *Config) { c.MaxMemoryPolicy = "allkeys-lru" }, "maxmemory-policy"},
		{"maxclients zero", func(c *Config) { c.MaxClients = 0 }, "maxclients"},
		{"compressed links no cap", func(c *Config) { c.ReplLinkCompressionMaxLinks = 0 }, ""},
		{"compressed links negative", func(c *Config) { c.ReplLinkCompressionMaxLinks = -1 }, "repl-link-compression-max-links"},
		{"dir empty", func(c *Config) { c.Dir = "" }, "dir"},
		{"loglevel empty", func(c *Config) { c.LogLevel = "" }, "loglevel"},
		{"loglevel upper", func(c *Config) { c.LogLevel = "DEBUG" }, "loglevel"},
		{"log-format unknown", func(c *Config) { c.LogFormat = "xml" }, "log-format"},
		{"metrics-port negative", func(c *Config) { c.MetricsPort = -1 }, "metrics-port"},
		{"metrics-bind empty", func(c *Config) { c.MetricsBind = "" }, "metrics-bind"},
		{"metrics-web-config NUL", func(c *Config) { c.MetricsWebConfig = "a\x00" }, "metrics-web-config"},
		{"metrics-web-config unread", func(c *Config) { c.MetricsWebConfig = "/no/such/file" }, ""},
		// metrics-tls needs the proxy's certificate and key, and its CA
		// under tls-auth-clients yes, as tls-port does; without a
		// metrics-port it serves nothing and needs nothing.
		{"metrics-tls without port", func(c *Config) { c.MetricsTLS = true }, ""},
		{"metrics-tls without cert", func(c *Config) { c.MetricsTLS, c.MetricsPort = true, 9121 }, "metrics-tls"},
		{"metrics-tls without key", func(c *Config) { c.MetricsTLS, c.MetricsPort, c.TLSCertFile = true, 9121, "c" }, "metrics-tls"},
		{"metrics-tls without ca", func(c *Config) { c.MetricsTLS, c.MetricsPort, c.TLSCertFile, c.TLSKeyFile = true, 9121, "c", "k" }, "tls-ca-cert-file"},
		{"metrics-tls no client auth", func(c *Config) {
			c.MetricsTLS, c.MetricsPort, c.TLSCertFile, c.TLSKeyFile, c.TLSAuthClients = true, 9121, "c", "k", TLSAuthNo
		}, ""},
		{"metrics-tls with ca", func(c *Config) {
			c.MetricsTLS, c.MetricsPort, c.TLSCertFile, c.TLSKeyFile, c.TLSCACertFile = true, 9121, "c", "k", "ca"
		}, ""},
		{"tls-port negative", func(c *Config) { c.TLSPort = -1 }, "tls-port"},
		{"tls-port without cert", func(c *Config) { c.TLSPort = 6380 }, "tls-cert-file"},
		{"tls-port without key", func(c *Config) { c.TLSPort, c.TLSCertFile = 6380, "c" }, "tls-key-file"},
		{"tls-port without ca", func(c *Config) { c.TLSPort, c.TLSCertFile, c.TLSKeyFile = 6380, "c", "k" }, "tls-ca-cert-file"},
		{"tls-port same as port", func(c *Config) { c.TLSPort, c.TLSCertFile, c.TLSKeyFile, c.TLSCACertFile = 6379, "c", "k", "ca" }, "tls-port"},
		{"tls-port with ca file", func(c *Config) { c.TLSPort, c.TLSCertFile, c.TLSKeyFile, c.TLSCACertFile = 6380, "c", "k", "ca" }, ""},
		{"tls-port with ca dir", func(c *Config) { c.TLSPort, c.TLSCertFile, c.TLSKeyFile, c.TLSCACertDir = 6380, "c", "k", "d" }, ""},
		{"tls-port TLS only", func(c *Config) {
			c.Port, c.TLSPort, c.TLSCertFile, c.TLSKeyFile, c.TLSCACertDir = 0, 6380, "c", "k", "d"
		}, ""},
		{"tls-port no client auth needs no ca", func(c *Config) {
			c.TLSPort, c.TLSCertFile, c.TLSKeyFile, c.TLSAuthClients = 6380, "c", "k", TLSAuthNo
		}, ""},
		{"tls-replication needs ca", func(c *Config) {
			c.TLSReplication, c.TLSCertFile, c.TLSKeyFile, c.TLSAuthClients = true, "c", "k", TLSAuthNo
		}, "tls-ca-cert-file"},
		{"tls-replication without cert", func(c *Config) { c.TLSReplication = true }, "tls-cert-file"},
		{"tls files unused", func(c *Config) { c.TLSCertFile = "c" }, ""},
		{"tls-auth-clients empty", func(c *Config) { c.TLSAuthClients = "" }, "tls-auth-clients"},
		{"tls client cert alone", func(c *Config) { c.TLSClientCertFile = "c" }, "tls-client-cert-file"},
		{"tls client key alone", func(c *Config) { c.TLSClientKeyFile = "k" }, "tls-client-cert-file"},
		{"tls-protocols gap", func(c *Config) { c.TLSProtocols = "TLSv1 TLSv1.3" }, "tls-protocols"},
		{"tls-ciphers expression", func(c *Config) { c.TLSCiphers = "HIGH:!aNULL" }, "tls-ciphers"},
		{"tls-ciphersuites subset", func(c *Config) { c.TLSCiphersuites = "TLS_AES_256_GCM_SHA384" }, "tls-ciphersuites"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.change(c)
			err := c.Validate()
			if tc.directive == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Directive != tc.directive {
				t.Fatalf("Validate = %v, want an error naming %s", err, tc.directive)
			}
			if ce.File != "" || ce.Line != 0 || ce.Err == nil {
				t.Fatalf("Validate error has a location: %#v", ce)
			}
		})
	}
}

func TestValidateEnumMessage(t *testing.T) {
	c := DefaultConfig()
	c.MaxMemoryPolicy = "volatile-lru"
	err := c.Validate()
	want := `config: maxmemory-policy: invalid value "volatile-lru": argument(s) must be one of the following: noeviction, evict-snapshots`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestClone(t *testing.T) {
	t.Run("deep", func(t *testing.T) {
		c := DefaultConfig()
		c.Bind = []string{"10.0.0.1", "10.0.0.2"}
		n := c.Clone()
		if !reflect.DeepEqual(n, c) {
			t.Fatalf("clone differs: %+v", n)
		}
		n.Bind[0] = "changed"
		n.ClientOutputBufferLimit.Replica.Hard = 1
		if c.Bind[0] != "10.0.0.1" || c.ClientOutputBufferLimit.Replica.Hard != 256<<20 {
			t.Fatal("clone shares state with the original")
		}
	})
	t.Run("nil", func(t *testing.T) {
		var c *Config
		if c.Clone() != nil {
			t.Fatal("nil.Clone() != nil")
		}
	})
}

// TestSnapshotFromAddr: "" for snapshot-from primary, so that a caller
// falls back to the primary's address, and a dial address otherwise, IPv6
// hosts bracketed.
func TestSnapshotFromAddr(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"primary"}, ""},
		{[]string{""}, ""},
		{[]string{"10.0.0.2", "6379"}, "10.0.0.2:6379"},
		{[]string{"replica-1.example", "6380"}, "replica-1.example:6380"},
		{[]string{"::1", "7000"}, "[::1]:7000"},
		{[]string{"fe80::1%eth0 7001"}, "[fe80::1%eth0]:7001"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			c := DefaultConfig()
			if err := c.Set("snapshot-from", tc.args...); err != nil {
				t.Fatal(err)
			}
			if got := c.SnapshotFromAddr(); got != tc.want {
				t.Fatalf("SnapshotFromAddr() = %q, want %q", got, tc.want)
			}
		})
	}
	if got := DefaultConfig().SnapshotFromAddr(); got != "" {
		t.Fatalf("default SnapshotFromAddr() = %q, want \"\" (the primary)", got)
	}
}

func TestErrorString(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  *Error
		want string
	}{
		{"file and line", &Error{File: "a.conf", Line: 3, Directive: "foo", Err: ErrUnknownDirective},
			"config: a.conf:3: foo: unknown directive"},
		{"file only", &Error{File: "a.conf", Err: fs.ErrNotExist}, "config: a.conf: file does not exist"},
		{"line only", &Error{Line: 2, Err: ErrUnbalancedQuotes}, "config: line 2: unbalanced quotes"},
		{"directive only", &Error{Directive: "port", Err: ErrArgCount}, "config: port: wrong number of arguments"},
		{"bare", &Error{Err: ErrUnsupported}, "config: not supported"},
		{"nil Err", &Error{Directive: "port"}, "config: port: <nil>"},
		{"odd directive", &Error{Directive: "a b", Err: ErrUnknownDirective}, `config: "a b": unknown directive`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Fatalf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("unwrap", func(t *testing.T) {
		err := fmt.Errorf("startup: %w", &Error{Directive: "port", Err: fmt.Errorf("%w: x", ErrInvalidValue)})
		var ce *Error
		if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidValue) || errors.Is(err, ErrArgCount) {
			t.Fatalf("errors.As/Is failed on %v", err)
		}
	})
}

// TestSecretsNotInErrors: no error about a secret directive contains its value.
func TestSecretsNotInErrors(t *testing.T) {
	const secret = "hunter2-secret"
	for _, tc := range []struct {
		name string
		text string
	}{
		{"masterauth extra", "masterauth " + secret + " x"},
		{"requirepass extra", "requirepass x " + secret},
		{"masterauth unbalanced", "masterauth \"" + secret},
		{"validate", "masteruser " + secret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			err := c.Load("s.conf", tc.text)
			if err == nil {
				err = c.Validate()
			}
			if err == nil || strings.Contains(err.Error(), secret) {
				t.Fatalf("error %v", err)
			}
		})
	}
}

// TestSyncRateLimitFloor: a repl-link-sync-rate-limit that cannot move
// SyncRatePiece bytes within repl-timeout is refused, by Validate (CONFIG
// SET) and at startup, with an error that names the least rate and 0; at
// and above that floor, and 0 (unlimited), it is accepted, whatever the
// order of the two directives.
func TestSyncRateLimitFloor(t *testing.T) {
	floor60 := int64(SyncRatePiece+59) / 60 // 2202 at the default repl-timeout
	for _, tc := range []struct {
		name    string
		rate    int64
		timeout time.Duration
		ok      bool
	}{
		{"unlimited", 0, time.Minute, true},
		{"one byte a second", 1, time.Minute, false},
		{"just below the floor", floor60 - 1, time.Minute, false},
		{"at the floor", floor60, time.Minute, true},
		{"a piece a second at repl-timeout 1", SyncRatePiece, time.Second, true},
		{"below it at repl-timeout 1", SyncRatePiece - 1, time.Second, false},
		{"12mb", 12 << 20, time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.ReplLinkSyncRateLimit, c.ReplTimeout = tc.rate, tc.timeout
			err := c.Validate()
			if tc.ok {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Directive != "repl-link-sync-rate-limit" || !errors.Is(err, ErrInvalidValue) {
				t.Fatalf("Validate = %v; want an invalid repl-link-sync-rate-limit", err)
			}
			least := (SyncRatePiece + int64(tc.timeout/time.Second) - 1) / int64(tc.timeout/time.Second)
			if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("at least %d", least)) || !strings.Contains(msg, "0 for unlimited") {
				t.Fatalf("error %q; want it to name the least rate, %d, and 0", msg, least)
			}
		})
	}
	for _, args := range [][]string{
		{"--repl-link-sync-rate-limit", "1"},
		{"--repl-timeout", "1", "--repl-link-sync-rate-limit", "100kb"},
		{"--repl-link-sync-rate-limit", "100kb", "--repl-timeout", "1"},
	} {
		if _, err := Parse(args); !errors.Is(err, ErrInvalidValue) {
			t.Errorf("Parse(%q) = %v; want the start refused", args, err)
		}
	}
	if _, err := Parse([]string{"--repl-timeout", "1", "--repl-link-sync-rate-limit", "130kb"}); err != nil {
		t.Errorf("a 130kb cap at repl-timeout 1: %v", err)
	}
}
