package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// httpGet fetches path from the proxy's monitoring server and returns the
// status and body.
func httpGet(t testing.TB, p *testProxy, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + p.MetricsAddr().String() + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// scrape reads /metrics into a map from series ("name" or
// `name{a="x",b="y"}`, labels in the order the text format prints them:
// sorted by name) to value.
func scrape(t testing.TB, p *testProxy) map[string]float64 {
	t.Helper()
	code, body := httpGet(t, p, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	return parseMetrics(t, body)
}

// parseMetrics reads Prometheus's text format as scrape does.
func parseMetrics(t testing.TB, body string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// metricsProxy runs a proxy with its monitoring server on a free port.
func metricsProxy(t testing.TB, args ...string) *testProxy {
	t.Helper()
	port := redistest.FreePort(t)
	return startProxy(t, append([]string{"--metrics-port", strconv.Itoa(port)}, args...)...)
}

// TestMetricsOff: with metrics-port 0 (the default) there is no HTTP server.
func TestMetricsOff(t *testing.T) {
	p := startProxy(t)
	if a := p.MetricsAddr(); a != nil {
		t.Fatalf("MetricsAddr %v with metrics-port 0", a)
	}
}

// TestMetricsNoUpstream: without Redis. /healthz answers 200; a proxy with
// no upstream and no history is not ready (503, one line saying why);
// /metrics carries the INFO figures; the server goes with Run.
func TestMetricsNoUpstream(t *testing.T) {
	p := metricsProxy(t)
	if code, body := httpGet(t, p, "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	code, body := httpGet(t, p, "/readyz")
	if code != http.StatusServiceUnavailable || strings.Count(body, "\n") != 1 ||
		!strings.Contains(body, "no upstream") || !strings.Contains(body, "no sync with the primary has completed") {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	m := scrape(t, p)
	for series, want := range map[string]float64{
		"replproxy_upstream_link_up":                       0,
		`replproxy_upstream_link_state{state="none"}`:      1,
		`replproxy_upstream_link_state{state="connected"}`: 0,
		"replproxy_connected_replicas":                     0,
		"replproxy_master_repl_offset_bytes":               0,
		`replproxy_syncs_total{result="full"}`:             0,
		`replproxy_replicas_closed_total{reason="killed"}`: 0,
		// Snapshots come from the primary by default, and every reason
		// the source can fail for has its series before any failure.
		`replproxy_snapshot_source_info{fallback="yes",source="primary"}`: 1,
		`replproxy_snapshot_source_failures_total{reason="replid"}`:       0,
		`replproxy_snapshot_source_failures_total{reason="refused"}`:      0,
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if _, ok := m["replproxy_snapshot_size_bytes"]; ok {
		t.Error("snapshot_size_bytes present with no snapshot")
	}
	if m[`replproxy_memory_bytes{category="runtime"}`] <= 0 || m["replproxy_used_memory_bytes"] <= 0 {
		t.Error("memory figures missing")
	}
	if _, ok := m["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}

	addr := p.MetricsAddr().String()
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("metrics server still listening after Run returned")
	}
}

// TestMetricsCloseBeforeRun: Close on a server that never ran closes the
// monitoring listener too.
func TestMetricsCloseBeforeRun(t *testing.T) {
	port := redistest.FreePort(t)
	p := newTestProxy(t, proxySetup{idle: true, args: []string{"--metrics-port", strconv.Itoa(port)}})
	addr := p.MetricsAddr().String()
	p.Close()
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("metrics listener open after Close")
	}
}

// TestMetricsMatchInfo: against a real primary and
// a real replica of the proxy, /metrics scraped over HTTP carries INFO's
// figures, and /readyz follows the readiness rule: 503 before any sync, 200
// with the link up, and still 200 once the primary is killed, because the
// history serves a returning replica by partial resync (which the test then
// has it do).
func TestMetricsMatchInfo(t *testing.T) {
	primary, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 20000, "key", 100)
	// Without the stream log, so that the snapshot stays in memory for its
	// series (package snapshots, persist.go).
	p := metricsProxy(t, "--repl-log-size", "0")
	xc := redistest.Dial(t, p.AddrString())

	if code, body := httpGet(t, p, "/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before any upstream: %d %q", code, body)
	}
	host, port, _ := strings.Cut(primary.Addr(), ":")
	xc.MustDo(t, "REPLICAOF", host, port)
	waitLinkUp(t, xc)
	if code, body := httpGet(t, p, "/readyz"); code != http.StatusOK || body != "upstream link up\n" {
		t.Fatalf("/readyz with the link up: %d %q", code, body)
	}

	_, rcs := redistest.StartReplicas(t, 1, p.AddrString())
	redistest.WaitSynced(t, pc, rcs[0])
	for i := range 100 {
		pc.MustDo(t, "SET", "k"+strconv.Itoa(i), i)
	}
	off := waitOffsetsEqual(t, pc, xc)
	redistest.WaitFor(t, 10*time.Second, "replica ACKs the proxy's offset", func() bool {
		return strings.Contains(xc.Info(t, "replication")["slave0"], "offset="+itoa(off)+",")
	})

	// The primary pings every 10s, so figures may move between INFO and the
	// scrape: compare until one scrape between two equal INFOs matches.
	var mismatch string
	redistest.WaitFor(t, 30*time.Second, "/metrics equal to INFO", func() bool {
		before := xc.Info(t, "everything")
		m := scrape(t, p)
		after := xc.Info(t, "everything")
		mismatch = compareMetricsWithInfo(m, before, after)
		return mismatch == ""
	})
	if mismatch != "" {
		t.Fatal(mismatch)
	}

	primary.Kill()
	redistest.WaitFor(t, 10*time.Second, "link down in /metrics", func() bool {
		return scrape(t, p)["replproxy_upstream_link_up"] == 0
	})
	code, body := httpGet(t, p, "/readyz")
	if code != http.StatusOK || !strings.Contains(body, "; serving from history: partial resyncs from offset ") {
		t.Fatalf("/readyz with the link down and a history: %d %q", code, body)
	}
	// What readiness promised: the replica, disconnected, comes back and
	// continues by partial resync with no primary.
	xc.MustDo(t, "CLIENT", "KILL", "TYPE", "replica")
	redistest.WaitFor(t, 20*time.Second, "the replica back by partial resync", func() bool {
		m := scrape(t, p)
		return m[`replproxy_syncs_total{result="partial_ok"}`] == 1 && m["replproxy_connected_replicas"] == 1 &&
			m[`replproxy_replicas_closed_total{reason="killed"}`] == 1
	})
	if m := scrape(t, p); m[`replproxy_syncs_total{result="full"}`] != 1 {
		t.Fatalf("sync_full %v after the partial resync, want 1", m[`replproxy_syncs_total{result="full"}`])
	}
}

// TestReadyzNeverSynced: a proxy whose primary is not there has no history
// to serve: 503, saying so.
func TestReadyzNeverSynced(t *testing.T) {
	p := metricsProxy(t, "--replicaof", "127.0.0.1", strconv.Itoa(redistest.FreePort(t)))
	redistest.WaitFor(t, 10*time.Second, "a link attempt", func() bool {
		return p.stats.UpstreamLinkFailures.Load() > 0
	})
	code, body := httpGet(t, p, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "upstream link ") ||
		!strings.HasSuffix(body, "; no sync with the primary has completed\n") {
		t.Fatalf("/readyz: %d %q", code, body)
	}
}

// compareMetricsWithInfo returns "" when m carries the figures of INFO
// (before and after the scrape must agree on each), else the first
// difference.
func compareMetricsWithInfo(m map[string]float64, before, after map[string]string) string {
	// Every replica's slaveN line gives its offset, under its id and address.
	slave := func(info map[string]string) map[string]string {
		fields := map[string]string{}
		for _, kv := range strings.Split(info["slave0"], ",") {
			k, v, _ := strings.Cut(kv, "=")
			fields[k] = v
		}
		return fields
	}
	sb, sa := slave(before), slave(after)
	pairs := []struct{ series, field string }{
		{"replproxy_master_repl_offset_bytes", "master_repl_offset"},
		{"replproxy_upstream_repl_offset_bytes", "slave_repl_offset"},
		{"replproxy_upstream_read_repl_offset_bytes", "slave_read_repl_offset"},
		{"replproxy_repl_backlog_histlen_bytes", "repl_backlog_histlen"},
		{"replproxy_connected_replicas", "connected_slaves"},
		{`replproxy_syncs_total{result="full"}`, "sync_full"},
		{`replproxy_syncs_total{result="partial_ok"}`, "sync_partial_ok"},
		{`replproxy_syncs_total{result="partial_err"}`, "sync_partial_err"},
		{`replproxy_full_syncs_total{reason="requested"}`, "sync_full_requested"},
		{`replproxy_full_syncs_total{reason="replid_mismatch"}`, "sync_full_replid_mismatch"},
		{`replproxy_snapshot_fetches_by_reason_total{reason="replica_needed"}`, "snapshot_fetches_replica_needed"},
		{`replproxy_snapshot_fetches_by_reason_total{reason="refresh"}`, "snapshot_fetches_refresh"},
		{"replproxy_snapshot_source_fetches_total", "snapshot_source_fetches"},
		{"replproxy_snapshot_source_fallbacks_total", "snapshot_source_fallbacks"},
		{`replproxy_snapshot_source_failures_total{reason="down"}`, "snapshot_source_failures_down"},
		{`replproxy_upstream_syncs_total{type="full"}`, "upstream_full_syncs"},
		{`replproxy_upstream_syncs_total{type="partial"}`, "upstream_partial_syncs"},
		{"replproxy_upstream_connects_total", "upstream_connects"},
		{"replproxy_repl_input_bytes_total", "total_net_repl_input_bytes"},
		{"replproxy_repl_output_bytes_total", "total_net_repl_output_bytes"},
		{"replproxy_snapshot_size_bytes", "snapshot_size"},
		{"replproxy_snapshot_offset_bytes", "snapshot_offset"},
		{`replproxy_memory_bytes{category="snapshots"}`, "mem_snapshots"},
		{`replproxy_memory_bytes{category="replication_backlog"}`, "mem_replication_backlog"},
		{`replproxy_memory_bytes{category="link_compression"}`, "mem_link_compression"},
		{`replproxy_replicas_closed_total{reason="killed"}`, "replicas_closed_killed"},
		{"replproxy_upstream_link_up", ""},
	}
	for _, pr := range pairs {
		want := "1" // link up
		if pr.field != "" {
			want = before[pr.field]
			if after[pr.field] != want {
				return pr.field + " moved during the scrape"
			}
		}
		if got, ok := m[pr.series]; !ok || strconv.FormatFloat(got, 'f', -1, 64) != want {
			return pr.series + " = " + strconv.FormatFloat(got, 'f', -1, 64) + ", INFO " + pr.field + " = " + want
		}
	}
	if sb["offset"] != sa["offset"] {
		return "slave0 offset moved during the scrape"
	}
	// The replica's series are under ip and port from the slave0 line.
	for series, v := range m {
		if strings.HasPrefix(series, "replproxy_replica_offset_bytes{") {
			if series != `replproxy_replica_offset_bytes{replica_ip="`+sb["ip"]+`",replica_port="`+sb["port"]+`"}` {
				return series + ": not slave0's ip and port"
			}
			if strconv.FormatFloat(v, 'f', -1, 64) != sb["offset"] {
				return series + " = " + strconv.FormatFloat(v, 'f', -1, 64) + ", slave0 offset=" + sb["offset"]
			}
			return ""
		}
	}
	return "no replproxy_replica_offset_bytes series"
}

// TestReadyzFlipsWhenUpstreamDies: a proxy synced with a primary that has
// written nothing since holds an empty backlog, so nothing a returning
// replica could continue from: /readyz is 200 while the link is up and 503
// once the primary is killed.
func TestReadyzFlipsWhenUpstreamDies(t *testing.T) {
	primary, _ := startPrimary(t, "--repl-ping-replica-period", "3600")
	p := metricsProxy(t, replicaOf(primary)...)
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	if code, body := httpGet(t, p, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with the link up: %d %q", code, body)
	}
	if n := xc.InfoInt(t, "replication", "repl_backlog_histlen"); n != 0 {
		t.Fatalf("repl_backlog_histlen %d, want 0", n)
	}
	primary.Kill()
	redistest.WaitFor(t, 10*time.Second, "/readyz 503 once the primary is gone", func() bool {
		code, _ := httpGet(t, p, "/readyz")
		return code == http.StatusServiceUnavailable
	})
	if _, body := httpGet(t, p, "/readyz"); !strings.HasSuffix(body, "; the backlog is empty\n") {
		t.Fatalf("/readyz body %q", body)
	}
}

// TestReadyzShuttingDown: once a graceful stop is asked for, the proxy is
// not ready, whatever its link.
func TestReadyzShuttingDown(t *testing.T) {
	p := newTestProxy(t, proxySetup{idle: true})
	p.Shutdown()
	if ok, why := p.readiness(); ok || why != "shutting down" {
		t.Fatalf("readiness() = %v, %q", ok, why)
	}
}

// TestMetricsLogMatchInfo: with the stream log on (the default), the
// repl_log_ and snapshot-on-disk series equal INFO persistence.
func TestMetricsLogMatchInfo(t *testing.T) {
	_, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 5000, "key", 100)
	p := metricsProxy(t)
	xc := redistest.Dial(t, p.AddrString())
	m := scrape(t, p)
	if m["replproxy_repl_log_enabled"] != 1 {
		t.Fatalf("replproxy_repl_log_enabled = %v before any upstream, want 1", m["replproxy_repl_log_enabled"])
	}
	host, port, _ := strings.Cut(pc.Addr(), ":")
	xc.MustDo(t, "REPLICAOF", host, port)
	waitLinkUp(t, xc)
	_, rcs := redistest.StartReplicas(t, 1, p.AddrString())
	redistest.WaitSynced(t, pc, rcs[0])
	for i := range 100 {
		pc.MustDo(t, "SET", "k"+strconv.Itoa(i), i)
	}
	waitOffsetsEqual(t, pc, xc)

	pairs := []struct{ series, field string }{
		{"replproxy_repl_log_first_offset_bytes", "repl_log_first_offset"},
		{"replproxy_repl_log_last_offset_bytes", "repl_log_last_offset"},
		{"replproxy_repl_log_bytes", "repl_log_bytes"},
		{"replproxy_repl_log_segments", "repl_log_segments"},
		{"replproxy_repl_log_synced_offset_bytes", "repl_log_synced_offset"},
		{"replproxy_repl_log_fsync_lag_bytes", "repl_log_fsync_lag_bytes"},
		{"replproxy_repl_log_errors_total", "repl_log_errors"},
		{"replproxy_repl_log_lag_bytes", "repl_log_lag_bytes"},
		{"replproxy_repl_log_restarts_total", "repl_log_restarts"},
		{"replproxy_repl_log_partial_syncs_total", "repl_log_partial_syncs"},
		{"replproxy_repl_log_replicas_moved_to_disk_total", "repl_log_replicas_moved_to_disk"},
		{"replproxy_repl_log_recovered_bytes", "repl_log_recovered_bytes"},
		{"replproxy_repl_log_recovery_cut_bytes", "repl_log_recovery_cut_bytes"},
		{"replproxy_snapshot_on_disk", "repl_snapshot_on_disk"},
		{"replproxy_snapshot_on_disk_size_bytes", "repl_snapshot_size"},
		{"replproxy_snapshot_on_disk_offset_bytes", "repl_snapshot_offset"},
	}
	var mismatch string
	redistest.WaitFor(t, 30*time.Second, "/metrics equal to INFO persistence", func() bool {
		before := xc.Info(t, "persistence")
		m := scrape(t, p)
		after := xc.Info(t, "persistence")
		mismatch = ""
		if before["repl_log_status"] != "ok" || m["replproxy_repl_log_up"] != 1 {
			mismatch = "log status " + before["repl_log_status"] + ", replproxy_repl_log_up " + strconv.FormatFloat(m["replproxy_repl_log_up"], 'f', -1, 64)
			return false
		}
		if before["repl_snapshot_on_disk"] != "1" || before["repl_log_last_offset"] != before["repl_log_synced_offset"] {
			mismatch = "the snapshot not yet on disk, or the log not yet synced"
			return false
		}
		for _, pr := range pairs {
			want := before[pr.field]
			if after[pr.field] != want {
				mismatch = pr.field + " moved during the scrape"
				return false
			}
			if got, ok := m[pr.series]; !ok || strconv.FormatFloat(got, 'f', -1, 64) != want {
				mismatch = pr.series + " = " + strconv.FormatFloat(got, 'f', -1, 64) + ", INFO " + pr.field + " = " + want
				return false
			}
		}
		if _, ok := m["replproxy_repl_log_last_fsync_age_seconds"]; !ok {
			mismatch = "no replproxy_repl_log_last_fsync_age_seconds after a sync"
			return false
		}
		return true
	})
	if mismatch != "" {
		t.Fatal(mismatch)
	}
	// The log's index is counted: INFO and /metrics read
	// the same figure (again if the primary's PING moved it in between).
	redistest.WaitFor(t, 10*time.Second, "mem_repl_log_index > 0 and equal in /metrics", func() bool {
		idx := xc.InfoInt(t, "memory", "mem_repl_log_index")
		return idx > 0 && scrape(t, p)[`replproxy_memory_bytes{category="repl_log_index"}`] == float64(idx)
	})
}

// replicaSeriesOf returns the value of each replproxy_replica_ series in m
// (its name and labels as scrape gives them) and fails the test for any
// whose labels do not start with ident, the replica's identity: the series
// of one replica that reconnects must keep their labels.
func replicaSeriesOf(t testing.TB, m map[string]float64, ident string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for series, v := range m {
		name, labels, ok := strings.Cut(series, "{")
		if !strings.HasPrefix(name, "replproxy_replica_") {
			continue
		}
		if !ok || !strings.HasPrefix(labels, ident) {
			t.Errorf("series %s: want labels %s…", series, ident)
		}
		out[series] = v
	}
	return out
}

// TestMetricsReplicaReconnect: a real
// redis-server replica of the proxy that reconnects, by partial resync and
// then by full sync, keeps its series (the same labels before, during and
// after), and no scrape reports it further behind than it is: the primary
// writes only while the replica is paused (its lag is then exactly what was
// written since its last ACK), the stream stands still while it resyncs,
// and a replica still syncing has no lag series at all. Before, its series
// were labelled by client id and, until its first ACK, its lag was the whole
// stream offset.
func TestMetricsReplicaReconnect(t *testing.T) {
	// No PINGs from the primary: the stream moves only when the test writes.
	primary, pc := startPrimary(t, "--repl-ping-replica-period", "3600")
	pc.MustDo(t, "DEBUG", "POPULATE", 5000, "key", 100)
	p := metricsProxy(t, replicaOf(primary)...)
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	host, port, _ := strings.Cut(p.AddrString(), ":")
	// Each key loads 50 µs late (a full sync's load lasts a second or more,
	// so scrapes land in it), and the replica answers INFO while it loads.
	rs := redistest.StartServer(t, "--replicaof", host, port,
		"--key-load-delay", "50", "--loading-process-events-interval-bytes", "1024")
	rc := redistest.Dial(t, rs.Addr())
	redistest.WaitSynced(t, pc, rc)
	ident := `replica_ip="127.0.0.1",replica_port="` + strconv.Itoa(rs.Port()) + `"`
	offsetSeries := "replproxy_replica_offset_bytes{" + ident + "}"
	lagSeries := "replproxy_replica_lag_bytes{" + ident + "}"

	// acked waits until the replica has acknowledged the stream's end,
	// and returns that offset and the replica's series.
	acked := func(what string) (int64, map[string]float64) {
		t.Helper()
		var m map[string]float64
		redistest.WaitFor(t, 20*time.Second, what, func() bool {
			m = scrape(t, p)
			off, ok := m[offsetSeries]
			return ok && off == m["replproxy_master_repl_offset_bytes"] && m[lagSeries] == 0
		})
		return int64(m["replproxy_master_repl_offset_bytes"]), replicaSeriesOf(t, m, ident)
	}
	off0, before := acked("the replica's first ACK of the stream's end")

	// Paused, the replica holds off0 and acknowledges nothing: its lag is
	// exactly what the primary writes meanwhile.
	rs.Pause()
	for i := range 200 {
		pc.MustDo(t, "SET", "reconnect:"+strconv.Itoa(i), strings.Repeat("v", 1000))
	}
	off1 := waitOffsetsEqual(t, pc, xc)
	if lag := scrape(t, p)[lagSeries]; lag != float64(off1-off0) {
		t.Fatalf("paused replica: lag %v bytes, want %d (written since its ACK of %d)", lag, off1-off0, off0)
	}

	// Partial resync: its connection is killed while it is paused, and it
	// comes back with PSYNC from off0. It holds at least off0 throughout,
	// so no scrape may show it more than off1-off0 behind.
	partialBefore := xc.InfoInt(t, "stats", "sync_partial_ok")
	xc.MustDo(t, "CLIENT", "KILL", "TYPE", "replica")
	rs.Resume()
	redistest.WaitFor(t, 20*time.Second, "the replica back by partial resync, acknowledging the stream's end", func() bool {
		m := scrape(t, p)
		if lag, ok := replicaSeriesOf(t, m, ident)[lagSeries]; ok && lag > float64(off1-off0) {
			t.Fatalf("reconnecting replica: lag %v bytes, but it holds at least %d of %d", lag, off0, off1)
		}
		return xc.InfoInt(t, "stats", "sync_partial_ok") > partialBefore && m[offsetSeries] == float64(off1)
	})

	// Full sync: the replica becomes a primary of its own and returns under
	// a replid the proxy does not know. The stream stands still at off1, so
	// no scrape may show more lag than the snapshot served is behind; while the replica is still syncing or loading
	// after a scrape, that scrape must show no lag series at all.
	fullBefore := xc.InfoInt(t, "stats", "sync_full")
	// It is served the held snapshot and the stream after it: until it
	// acknowledges past the snapshot it really is off1-snapOff behind (the
	// snapshot may be older than the stream's end), and never further.
	snapOff := off1 - xc.InfoInt(t, "persistence", "repl_snapshot_stream_since")
	rc.MustDo(t, "REPLICAOF", "NO", "ONE")
	rc.MustDo(t, "REPLICAOF", host, port)
	syncing := 0
	redistest.WaitFor(t, 30*time.Second, "the replica back by full sync, acknowledging the stream's end", func() bool {
		m := replicaSeriesOf(t, scrape(t, p), ident)
		lag, hasLag := m[lagSeries]
		if hasLag && lag > float64(off1-snapOff) {
			t.Fatalf("replica in full sync: lag %v bytes with the stream standing at %d and the snapshot served at %d", lag, off1, snapOff)
		}
		// Syncing as the proxy sees it: not yet online (its payload not all
		// sent) or online but not yet acknowledging on this connection. The
		// replica's own INFO is read after the scrape and may already have
		// moved on, so it only tells the test that the sync is still under
		// way; the lag series must follow the proxy's state.
		online := m["replproxy_replica_state{"+ident+`,state="online"}`] == 1
		if !online && hasLag {
			t.Fatalf("a lag series (%v) for a replica the proxy has not put online: %v", lag, m)
		}
		ri := rc.Info(t, "replication")
		if ri["master_link_status"] != "up" || ri["master_sync_in_progress"] == "1" {
			syncing++
			return false
		}
		return m[offsetSeries] == float64(off1)
	})
	if syncing == 0 {
		t.Fatal("no scrape while the replica was syncing: the test did not see its full sync")
	}
	if n := xc.InfoInt(t, "stats", "sync_full"); n != fullBefore+1 {
		t.Fatalf("sync_full %d, want %d: the replica did not take a full sync", n, fullBefore+1)
	}

	// The same series as before both reconnects, no others.
	_, after := acked("the replica's ACK after the full sync")
	for s := range before {
		if _, ok := after[s]; !ok {
			t.Errorf("series %s gone after the reconnects", s)
		}
	}
	for s := range after {
		if _, ok := before[s]; !ok {
			t.Errorf("series %s new after the reconnects", s)
		}
	}
}

// promtool runs promtool with args and stdin, and returns its combined
// output; a non-zero exit fails the test. Without promtool the test skips,
// or fails under CI=true (`make promtool` installs it, as make test does).
func promtool(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	bin := redistest.RequireTool(t, "promtool")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestPromtoolAlertRules: the alerting rules shipped in deploy/prometheus
// pass `promtool check rules`, and `promtool test rules` runs their tests
// (input series, the alerts expected to fire and not to). That the rules
// name only metrics /metrics serves is TestMetricDocs' (proxy/metrics).
func TestPromtoolAlertRules(t *testing.T) {
	dir := filepath.Join("..", "deploy", "prometheus")
	out := promtool(t, "", "check", "rules", filepath.Join(dir, "replproxy-alerts.yml"))
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules:\n%s", out)
	}
	if out := promtool(t, "", "test", "rules", filepath.Join(dir, "replproxy-alerts.test.yml")); !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules:\n%s", out)
	}
}

// TestPromtoolCheckMetrics: a real scrape of a proxy linked to a real
// primary, with a replica online, a snapshot and the stream log, so that
// every group of series is there, passes `promtool check metrics` (the text
// format, and its lint of names, units, _total and help) with nothing to
// report.
func TestPromtoolCheckMetrics(t *testing.T) {
	primary, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 1000, "key", 100)
	p := metricsProxy(t, replicaOf(primary)...)
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	_, rcs := redistest.StartReplicas(t, 1, p.AddrString())
	redistest.WaitSynced(t, pc, rcs[0])
	redistest.WaitFor(t, 10*time.Second, "the replica's series", func() bool {
		m := scrape(t, p)
		return m["replproxy_connected_replicas"] == 1 && m[`replproxy_snapshot_on_disk`] == 1 &&
			len(replicaSeriesOf(t, m, `replica_ip="127.0.0.1"`)) >= 6
	})
	_, body := httpGet(t, p, "/metrics")
	if out := promtool(t, body, "check", "metrics"); strings.TrimSpace(out) != "" {
		t.Fatalf("promtool check metrics:\n%s", out)
	}
}
