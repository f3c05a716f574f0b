package config

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/eviction"
)

// TestRewrite follows redis-server 7.0's rewriteConfig line by line: what
// is kept, replaced, blanked and appended.
func TestRewrite(t *testing.T) {
	old := strings.Join([]string{
		"# replproxy test file",
		"",
		"",
		"   port 7000   ", // replaced in place, trimmed
		"# the upstream",
		"slaveof 10.0.0.1 6379", // alias: replaced by replicaof
		"replicaof 10.0.0.2 6380",
		"snapshot-from primary",
		"loglevel notice", // at its default: kept, with the current value
		"loglevel debug",  // duplicate: blanked
		"",
		"bind 127.0.0.1", // bind at its default: removed, as Redis does
		"masterauth old", // empty now: removed
		"client-output-buffer-limit replica 1mb 1mb 0",
		"frobnicate 1",   // unknown: kept as a comment
		`requirepass "x`, // unparsable: kept as a comment
		"",
	}, "\n")
	c := DefaultConfig()
	c.Port = 7001
	c.MasterHost, c.MasterPort = "10.0.0.3", 6381
	c.SnapshotFromHost, c.SnapshotFromPort = "::1", 6382
	c.SnapshotFromFallback = false
	c.LogLevel = LogNotice
	c.RequirePass = `p w"d`
	c.MaxMemory = 3 << 30
	c.ReplBacklogSize = 1<<20 + 1
	c.ClientOutputBufferLimit.Replica = OutputBufferLimit{Hard: 2 << 20, Soft: 1 << 10, SoftPeriod: 5 * time.Second}
	c.ClientOutputBufferLimit.PubSub.SoftPeriod = time.Second
	c.Dir = "/var/lib/replproxy"
	c.AckReplicas = 2
	c.TLSPort = 7002
	c.TLSCertFile, c.TLSKeyFile, c.TLSCACertFile = "/etc/tls/proxy.crt", "/etc/tls/proxy key", "/etc/tls/ca.crt"

	want := strings.Join([]string{
		"# replproxy test file",
		"",
		"port 7001",
		"# the upstream",
		"replicaof 10.0.0.3 6381",
		"",
		"snapshot-from ::1 6382",
		"loglevel notice",
		"",
		"client-output-buffer-limit normal 0 0 0", // the first class takes the line, as in Redis
		"# ??? frobnicate 1",
		`# ??? requirepass "x`,
		"",
		RewriteSignature,
		"ack-policy replicas 2",
		"client-output-buffer-limit replica 2mb 1kb 5",
		"client-output-buffer-limit pubsub 32mb 8mb 1",
		`dir "/var/lib/replproxy"`,
		"maxmemory 3gb",
		"repl-backlog-size 1048577",
		`requirepass "p w\"d"`,
		"snapshot-from-fallback no",
		`tls-ca-cert-file "/etc/tls/ca.crt"`,
		`tls-cert-file "/etc/tls/proxy.crt"`,
		`tls-key-file "/etc/tls/proxy key"`,
		"tls-port 7002",
		"",
	}, "\n")
	got := c.Rewrite(old)
	if got != want {
		t.Fatalf("Rewrite:\n%s\nwant:\n%s", got, want)
	}
	// The unknown lines are comments now, so the result loads, and gives c.
	loaded := DefaultConfig()
	if err := loaded.Load("rw.conf", got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(loaded, c) {
		t.Fatalf("Load(Rewrite):\n got %+v\nwant %+v", loaded, c)
	}
	// A second rewrite adds no second signature and changes nothing but
	// the blank line after the last one (the empty string after the final
	// newline is a line to Redis too, and runs of blank lines become one).
	if again := c.Rewrite(got); again != got+"\n" {
		t.Fatalf("second Rewrite:\n%q\nwant:\n%q", again, got+"\n")
	}
	if third := c.Rewrite(got + "\n"); third != got+"\n" {
		t.Fatalf("third Rewrite:\n%q\nwant:\n%q", third, got+"\n")
	}
}

func TestRewriteCases(t *testing.T) {
	for _, tc := range []struct {
		name   string
		old    string
		change func(c *Config)
		want   string
	}{
		{"empty file, defaults", "", func(*Config) {}, ""},
		{"empty file, a change", "", func(c *Config) { c.MaxClients = 5 }, RewriteSignature + "\nmaxclients 5\n"},
		{"no final newline", "# c\nport 1", func(c *Config) { c.Port = 2 }, "# c\nport 2\n"},
		{"signature kept where it is", "# a\n" + RewriteSignature + "\nport 1\n", func(c *Config) { c.Port = 2; c.MaxClients = 5 },
			"# a\n" + RewriteSignature + "\nport 2\n\nmaxclients 5\n"},
		{"no upstream removes every replicaof", "replicaof a 1\nslaveof b 2\n", func(*Config) {}, "\n"},
		{"empty secret with spaces", "requirepass \"a b\"\n", func(c *Config) { c.RequirePass = "" }, "\n"},
		{"secret with quotes and bytes", "", func(c *Config) { c.MasterAuth = "a'b\\c\x00\xff\n" },
			RewriteSignature + "\nmasterauth \"a'b\\\\c\\x00\\xff\\n\"\n"},
		{"empty tls-* string removed", "tls-ciphers ECDHE-RSA-AES128-SHA\n", func(*Config) {}, "\n"},
		{"empty logfile kept quoted", "logfile x\n", func(*Config) {}, "logfile \"\"\n\n"},
		{"CRLF and indentation", "\t port 1\r\n", func(c *Config) { c.Port = 1 }, "port 1\n\n"},
		{"include is unknown", "include /x.conf\n", func(*Config) {}, "# ??? include /x.conf\n\n"},
		{"snapshot-from appended unquoted", "", func(c *Config) { c.SnapshotFromHost, c.SnapshotFromPort = "replica-1.example", 6379 },
			RewriteSignature + "\nsnapshot-from replica-1.example 6379\n"},
		{"bind-source-addr appended quoted", "", func(c *Config) { c.BindSourceAddr = "10.0.0.5" },
			RewriteSignature + "\nbind-source-addr \"10.0.0.5\"\n"},
		{"replicaof-cluster appended unquoted", "", func(c *Config) {
			c.ClusterSeeds, c.ClusterShard = []HostPort{{"10.0.0.1", 7000}, {"::1", 7001}}, "42"
		}, RewriteSignature + "\ncluster-shard 42\nreplicaof-cluster 10.0.0.1 7000 ::1 7001\n"},
		{"no cluster removes its lines", "replicaof-cluster a 1\ncluster-shard 0\n", func(*Config) {}, "\n"},
		{"empty bind-source-addr removed", "bind-source-addr 10.0.0.5\n", func(*Config) {}, "\n"},
		{"snapshot-from-fallback appended", "", func(c *Config) { c.SnapshotFromFallback = false },
			RewriteSignature + "\nsnapshot-from-fallback no\n"},
		{"snapshot-from back to primary", "snapshot-from 10.0.0.2 6379\nsnapshot-from-fallback no\n", func(*Config) {},
			"snapshot-from primary\nsnapshot-from-fallback yes\n\n"},
		{"snapshot-from defaults not appended", "# c\n", func(*Config) {}, "# c\n\n"},
		{"all classes named", "client-output-buffer-limit normal 0 0 0 slave 1 2 3 pubsub 32mb 8mb 60\n", func(*Config) {},
			"client-output-buffer-limit normal 0 0 0\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.change(c)
			got := c.Rewrite(tc.old)
			if got != tc.want {
				t.Fatalf("Rewrite(%q) = %q, want %q", tc.old, got, tc.want)
			}
			loaded := DefaultConfig()
			if err := loaded.Load("rw.conf", got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(loaded, c) {
				t.Fatalf("Load(Rewrite):\n got %+v\nwant %+v", loaded, c)
			}
		})
	}
}

// TestRewriteRandom is the property Load(Rewrite(old)) == c for random
// configurations written over random earlier files, and that a rewrite of
// a rewritten file settles.
func TestRewriteRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		const alphabet = "ab \"'\\#\t\n\x00\xffz"
		b := make([]byte, r.IntN(6))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	limit := func() OutputBufferLimit {
		return OutputBufferLimit{Hard: r.Int64N(1 << 40), Soft: r.Int64N(3) << (10 * r.IntN(4)), SoftPeriod: time.Duration(r.IntN(100)) * time.Second}
	}
	prev := ""
	for i := range 500 {
		c := DefaultConfig()
		if r.IntN(2) == 0 {
			c.Port = r.IntN(65536)
		}
		if r.IntN(2) == 0 {
			c.Bind = []string{"127.0.0.1", "-::1"}[:1+r.IntN(2)]
		}
		if r.IntN(2) == 0 {
			c.MasterHost, c.MasterPort = "10.0.0."+strconv.Itoa(r.IntN(256)), 1+r.IntN(65535)
		}
		if r.IntN(2) == 0 {
			c.MasterAuth = str()
			if c.MasterAuth != "" && r.IntN(2) == 0 {
				c.MasterUser = str()
			}
		}
		if r.IntN(2) == 0 {
			c.RequirePass = str()
		}
		if r.IntN(2) == 0 {
			c.SnapshotFromHost = []string{"10.0.0.9", "::1", "fe80::1%eth0", "primary", "replica-1.example"}[r.IntN(5)]
			c.SnapshotFromPort = 1 + r.IntN(65535)
		}
		c.SnapshotFromFallback = r.IntN(2) == 0
		if r.IntN(2) == 0 {
			for range 1 + r.IntN(3) {
				c.ClusterSeeds = append(c.ClusterSeeds, HostPort{[]string{"10.0.0.7", "::1", "node-1.example"}[r.IntN(3)], 1 + r.IntN(65535)})
			}
			c.ClusterShard = []string{"0", "16383", "07c37dfeb235213a872192d90877d0cd55635b91"}[r.IntN(3)]
		}
		if r.IntN(2) == 0 {
			c.ClusterRefreshInterval = time.Duration(100+r.IntN(5000)) * time.Millisecond
		}
		c.ProtectedMode = r.IntN(2) == 0
		c.ReplBacklogSize = MinReplBacklogSize + r.Int64N(1<<30)
		c.ReplTimeout = time.Duration(1+r.IntN(100)) * time.Second
		c.ShutdownTimeout = time.Duration(r.IntN(100)) * time.Second
		c.AckReplicas = r.IntN(3)
		c.ClientOutputBufferLimit = OutputBufferLimits{Normal: limit(), Replica: limit(), PubSub: limit()}
		if r.IntN(2) == 0 {
			c.ClientOutputBufferLimit = DefaultConfig().ClientOutputBufferLimit
		}
		c.MaxMemory = r.Int64N(3) << (10 * r.IntN(4))
		c.MaxMemoryPolicy = []eviction.Policy{eviction.NoEviction, eviction.EvictSnapshots}[r.IntN(2)]
		c.MaxClients = 1 + r.IntN(20000)
		if d := str(); d != "" {
			c.Dir = d
		}
		c.LogLevel = logLevels[r.IntN(len(logLevels))]
		c.LogFile = str()
		c.LogFormat = logFormats[r.IntN(len(logFormats))]
		c.MetricsPort = r.IntN(3)
		c.MetricsWebConfig = strings.ReplaceAll(str(), "\x00", "") // no file name holds one
		if r.IntN(2) == 0 {
			c.MetricsTLS = r.IntN(2) == 0
			c.TLSPort = 1 + r.IntN(65535)
			c.TLSReplication = r.IntN(2) == 0
			c.TLSCertFile, c.TLSKeyFile = "/tls/"+str()+"c", "/tls/"+str()+"k"
			if r.IntN(2) == 0 {
				c.TLSClientCertFile, c.TLSClientKeyFile = str()+"cc", str()+"ck"
			}
			c.TLSCACertDir = str()
			if c.TLSCACertDir == "" {
				c.TLSCACertFile = "ca" + str()
			}
			c.TLSAuthClients = tlsAuthValues[r.IntN(len(tlsAuthValues))]
			c.TLSProtocols = []string{"", "TLSv1.2", "TLSv1.2 TLSv1.3", "TLSv1.3"}[r.IntN(4)]
			c.TLSCiphers = []string{"", "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384"}[r.IntN(2)]
			c.TLSCiphersuites = []string{"", "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"}[r.IntN(2)]
			if r.IntN(3) == 0 {
				c.Port = 0 // TLS only
			}
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		got := c.Rewrite(prev)
		loaded := DefaultConfig()
		if err := loaded.Load("rw.conf", got); err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, got)
		}
		if !reflect.DeepEqual(loaded, c) {
			t.Fatalf("case %d: Load(Rewrite):\n got %+v\nwant %+v\n%s", i, loaded, c, got)
		}
		if again := c.Rewrite(got); c.Rewrite(again) != again {
			t.Fatalf("case %d: rewriting does not settle:\n%s", i, again)
		}
		prev = got
	}
}

func TestRewriteFile(t *testing.T) {
	c := DefaultConfig()
	c.Port = 7000

	t.Run("mode kept", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "r.conf")
		if err := os.WriteFile(path, []byte("# secret\nport 1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := c.RewriteFile(path); err != nil {
			t.Fatal(err)
		}
		checkFile(t, path, "# secret\nport 7000\n\n", 0o600)
		entries, _ := os.ReadDir(filepath.Dir(path))
		if len(entries) != 1 {
			t.Fatalf("temporary files left: %v", entries)
		}
	})
	t.Run("missing file created", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "new.conf")
		if err := c.RewriteFile(path); err != nil {
			t.Fatal(err)
		}
		checkFile(t, path, RewriteSignature+"\nport 7000\n", 0o644)
	})
	t.Run("symlink followed", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(dir, "real.conf")
		if err := os.WriteFile(target, []byte("port 1\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "link.conf")
		if err := os.Symlink("real.conf", link); err != nil {
			t.Fatal(err)
		}
		if err := c.RewriteFile(link); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Fatalf("link replaced: %v %v", fi, err)
		}
		checkFile(t, target, "port 7000\n\n", 0o640)
	})
	t.Run("error", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "no-such-dir", "r.conf")
		err := c.RewriteFile(path)
		var ce *Error
		if !errors.As(err, &ce) || ce.File != path || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("RewriteFile = %v, want an *Error wrapping ENOENT", err)
		}
	})
}

func checkFile(t *testing.T, path, text string, mode fs.FileMode) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != text {
		t.Fatalf("%s = %q, want %q", path, data, text)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != mode {
		t.Fatalf("%s mode %v, want %v", path, fi.Mode().Perm(), mode)
	}
}
