package proxy

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// goldenUpdate rewrites the golden files instead of comparing with them:
// go test ./proxy/ -run Golden -update
var goldenUpdate = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenVolatile names the fields whose values change from run to run or
// machine to machine: times, pids, ports, ids, paths, the Go version and
// platform, memory and byte counts that depend on timing or the allocator.
// Their values are replaced by "*"; their names stay, so a field renamed,
// added or removed still fails the comparison.
var goldenVolatile = regexp.MustCompile(`^(process_id|run_id|tcp_port|server_time_usec|uptime_in_seconds|uptime_in_days|` +
	`executable|os|arch_bits|go_version|used_memory.*|mem_.*|go_.*|used_cpu_.*|free_blocks.*|` +
	`snapshot_memory|total_net_.*|repl_output_bytes|master_port|master_last_io_seconds_ago|snapshot_age_seconds|` +
	`repl_log_replid|repl_log_first_offset|repl_log_last_offset|repl_log_bytes|repl_log_segments|repl_log_synced_offset|` +
	`repl_log_fsync_lag_bytes|repl_log_last_fsync_age|repl_log_lag_bytes|repl_log_lag_seconds|` +
	`lag|id|addr|laddr|fd|age|idle|qbuf-free|omem|tot-mem)$`)

// TestGoldenAdminOutput compares INFO everything, ROLE and CLIENT LIST with
// testdata/golden, for a proxy with no primary and for one linked to a fake
// primary with a replica and a named client. No Redis is needed.
func TestGoldenAdminOutput(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		p := startProxy(t)
		a := adminDial(t, p)
		a.do("CLIENT", "SETNAME", "golden")
		// With no primary the proxy makes up its replid.
		replID := redistest.ParseInfo(p.Info("replication"))["master_replid"]
		goldenCheck(t, "standalone", a, map[string]string{replID: "<random-replid>"})
	})
	t.Run("replica", func(t *testing.T) {
		// The fake primary syncs the proxy and sends nothing after, so the
		// offsets stay put; the default repl-timeout keeps the link up.
		h := startFakePrimary(t, (*fakeLink).goodFetch, (*fakeLink).goodFetch)
		p := startProxy(t, h.replicaOf()...)
		redistest.WaitFor(t, 10*time.Second, "proxy link up", func() bool {
			return redistest.ParseInfo(p.Info("replication"))["master_link_status"] == "up"
		})
		attachRawReplica(t, p, linkOffset+1)
		a := adminDial(t, p)
		a.do("CLIENT", "SETNAME", "golden")
		port := strconv.Itoa(h.Port())
		goldenCheck(t, "replica", a, map[string]string{"\n:" + port + "\n": "\n:<primary-port>\n"})
	})
}

// goldenCheck runs INFO everything, ROLE and CLIENT LIST on a and compares
// each, normalised, with testdata/golden/<name>.<command>.txt. subs replaces
// values known to vary (a port, a replid) wherever they stand.
func goldenCheck(t *testing.T, name string, a *adminConn, subs map[string]string) {
	t.Helper()
	for _, c := range []struct {
		file string
		args []string
	}{
		{"info", []string{"INFO", "everything"}},
		{"role", []string{"ROLE"}},
		{"clientlist", []string{"CLIENT", "LIST"}},
	} {
		got := goldenNormalise(strings.ReplaceAll(a.do(c.args...), "\r\n", "\n"))
		if c.file == "clientlist" {
			// The proxy lists its clients in no set order. The reply is
			// "$*", a line per client, then the bulk's own "\n" and "\r\n".
			lines := strings.Split(got, "\n")
			slices.Sort(lines[1 : len(lines)-2])
			got = strings.Join(lines, "\n")
		}
		for from, to := range subs {
			got = strings.ReplaceAll(got, from, to)
		}
		path := filepath.Join("testdata", "golden", name+"."+c.file+".txt")
		if *goldenUpdate {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./proxy/ -run Golden -update writes it)", err)
		}
		if got != string(want) {
			t.Errorf("%s differs from %s (if the change is meant, rerun with -update and review the diff):\n%s",
				strings.Join(c.args, " "), path, goldenDiff(string(want), got))
		}
	}
}

// goldenNormalise replaces volatile values in a reply with "*": the length of
// a bulk string, the value of an INFO line "key:value", and in a line of
// "k=v" fields (CLIENT LIST, INFO's slaveN) each volatile field's value.
func goldenNormalise(reply string) string {
	lines := strings.Split(reply, "\n")
	if strings.HasPrefix(lines[0], "$") {
		lines[0] = "$*"
	}
	for i, line := range lines {
		if k, v, ok := strings.Cut(line, ":"); ok && k != "" && !strings.ContainsAny(k, " =") {
			if goldenVolatile.MatchString(k) {
				v = "*"
			} else if strings.Contains(v, "=") {
				v = goldenFields(v, ",")
			}
			lines[i] = k + ":" + v
		} else if strings.Contains(line, "=") {
			lines[i] = goldenFields(line, " ")
		}
	}
	return strings.Join(lines, "\n")
}

// goldenFields normalises a list of k=v fields separated by sep.
func goldenFields(s, sep string) string {
	fields := strings.Split(s, sep)
	for i, f := range fields {
		if k, _, ok := strings.Cut(f, "="); ok && goldenVolatile.MatchString(k) {
			fields[i] = k + "=*"
		}
	}
	return strings.Join(fields, sep)
}

// goldenDiff lists the lines only want has ("-") and the lines only got has
// ("+"), each in its order: a renamed field shows as one of each.
func goldenDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + strconv.Quote(l) + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + strconv.Quote(l) + "\n")
		}
	}
	if b.Len() == 0 {
		return "the same lines in another order"
	}
	return b.String()
}
