package proxy

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/metrics"
	"github.com/replproxy/replproxy/proxy/report"
)

// renderReport renders one report both ways: INFO everything's fields, and
// the /metrics series the monitoring server makes of its figures. The
// server it was read from has no part in rendering it.
func renderReport(t testing.TB, _ *Server, r *report.Report) (info map[string]string, series map[string]float64) {
	t.Helper()
	var b strings.Builder
	for _, sec := range report.InfoSections {
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		r.WriteInfoSection(&b, sec)
	}
	h := (&metrics.Server{
		Figures: r.Figures,
		Ready:   func() (bool, string) { return true, "" },
	}).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, err := io.ReadAll(rec.Result().Body)
	if err != nil || rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %v", rec.Code, err)
	}
	return redistest.ParseInfo(b.String()), parseMetrics(t, string(body))
}

// TestReportInfoAndMetricsAgree: INFO and /metrics rendered from one
// report show the same value for every figure they share, so a figure
// derived differently on one side (the backlog zeroed without a history, a
// replica's lag, the log's fsync lag, input bytes with replication's) fails
// here. The proxy is linked to the fake primary, which sends nothing after
// the sync, with one replica; the log is on (the default).
func TestReportInfoAndMetricsAgree(t *testing.T) {
	h := startFakePrimary(t, (*fakeLink).goodFetch, (*fakeLink).goodFetch)
	p := startProxy(t, h.replicaOf()...)
	redistest.WaitFor(t, 10*time.Second, "proxy link up", func() bool {
		return redistest.ParseInfo(p.Info("replication"))["master_link_status"] == "up"
	})
	rr := attachRawReplica(t, p, linkOffset+1)

	// Online by partial resync but not yet acknowledged: its state is
	// there, its offset and lag are not (the offset would be 0, the lag
	// the whole stream).
	r := p.report(reportAll)
	if len(r.Replicas) != 1 {
		t.Fatalf("%d replicas in the report, want 1", len(r.Replicas))
	}
	info, m := renderReport(t, p.Server, r)
	slave := map[string]string{}
	for _, kv := range strings.Split(info["slave0"], ",") {
		k, v, _ := strings.Cut(kv, "=")
		slave[k] = v
	}
	// The replica's series are under the address and port of its slaveN
	// line, not its client id.
	replica := `{replica_ip="` + slave["ip"] + `",replica_port="` + slave["port"] + `"}`
	state := `{replica_ip="` + slave["ip"] + `",replica_port="` + slave["port"] + `",state="online"}`
	if m["replproxy_replica_state"+state] != 1 || slave["state"] != "online" {
		t.Errorf("replica_state%s = %v, slave0 state %s", state, m["replproxy_replica_state"+state], slave["state"])
	}
	for _, name := range []string{"replproxy_replica_offset_bytes", "replproxy_replica_lag_bytes", "replproxy_replica_lag_seconds"} {
		if v, ok := m[name+replica]; ok {
			t.Errorf("%s%s = %v before the replica's first ACK, want absent", name, replica, v)
		}
	}

	if err := rr.send("REPLCONF", "ACK", itoa(linkOffset)); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 10*time.Second, "the replica's ACK", func() bool {
		r = p.report(reportAll)
		return len(r.Replicas) == 1 && r.Replicas[0].HasLag
	})
	info, m = renderReport(t, p.Server, r)
	for _, kv := range strings.Split(info["slave0"], ",") {
		k, v, _ := strings.Cut(kv, "=")
		slave[k] = v
	}
	pairs := []struct {
		series string
		value  string // INFO's
	}{
		{"replproxy_upstream_last_io_seconds", info["master_last_io_seconds_ago"]},
		{"replproxy_upstream_connects_total", info["upstream_connects"]},
		{`replproxy_upstream_syncs_total{type="full"}`, info["upstream_full_syncs"]},
		{"replproxy_master_repl_offset_bytes", info["master_repl_offset"]},
		{"replproxy_upstream_repl_offset_bytes", info["slave_repl_offset"]},
		{"replproxy_upstream_read_repl_offset_bytes", info["slave_read_repl_offset"]},
		{"replproxy_repl_backlog_first_byte_offset_bytes", info["repl_backlog_first_byte_offset"]},
		{"replproxy_repl_backlog_histlen_bytes", info["repl_backlog_histlen"]},
		{"replproxy_stream_generation", info["stream_generation"]},
		{"replproxy_connected_replicas", info["connected_slaves"]},
		{"replproxy_replica_offset_bytes" + replica, slave["offset"]},
		{"replproxy_replica_lag_seconds" + replica, slave["lag"]},
		{"replproxy_replica_lag_bytes" + replica, itoa(r.Offset - r.Replicas[0].Offset)},
		{"replproxy_connected_clients", info["connected_clients"]},
		{`replproxy_syncs_total{result="partial_ok"}`, info["sync_partial_ok"]},
		{"replproxy_net_input_bytes_total", info["total_net_input_bytes"]},
		{"replproxy_net_output_bytes_total", info["total_net_output_bytes"]},
		{"replproxy_connections_received_total", info["total_connections_received"]},
		{"replproxy_repl_log_enabled", info["repl_log_enabled"]},
		{"replproxy_repl_log_last_offset_bytes", info["repl_log_last_offset"]},
		{"replproxy_repl_log_synced_offset_bytes", info["repl_log_synced_offset"]},
		{"replproxy_repl_log_fsync_lag_bytes", info["repl_log_fsync_lag_bytes"]},
		{"replproxy_snapshot_on_disk", info["repl_snapshot_on_disk"]},
		{"replproxy_used_memory_bytes", info["used_memory"]},
		{"replproxy_used_memory_peak_bytes", info["used_memory_peak"]},
		{"replproxy_memory_over_maxmemory", info["mem_over_maxmemory"]},
		{`replproxy_memory_bytes{category="replication_backlog"}`, info["mem_replication_backlog"]},
		{`replproxy_memory_bytes{category="clients_replicas"}`, info["mem_clients_slaves"]},
		{"replproxy_replication_buffers_bytes", info["mem_total_replication_buffers"]},
		{"replproxy_snapshots_on_disk_bytes", info["mem_snapshots_on_disk"]},
		{"replproxy_memory_not_counted_for_evict_bytes", info["mem_not_counted_for_evict"]},
		{"replproxy_memory_counted_for_evict_bytes", info["mem_counted_for_evict"]},
		{`replproxy_build_info{goversion="` + info["go_version"] + `",revision="unknown",version="` + info["replproxy_version"] + `"}`, "1"},
	}
	for _, pr := range pairs {
		got, ok := m[pr.series]
		if !ok || pr.value == "" || strconv.FormatFloat(got, 'f', -1, 64) != pr.value {
			t.Errorf("%s = %v (present %v), INFO %q", pr.series, got, ok, pr.value)
		}
	}
	// A replica's delays: INFO in milliseconds to the microsecond, the
	// gauges in seconds.
	for _, d := range []struct{ field, series string }{
		{"unsent_ms", "replproxy_replica_unsent_age_seconds"},
		{"unacked_ms", "replproxy_replica_unacked_age_seconds"},
	} {
		ms, err := strconv.ParseFloat(slave[d.field], 64)
		got, ok := m[d.series+replica]
		if err != nil || !ok || math.Abs(ms/1000-got) > 0.5e-6 {
			t.Errorf("%s%s = %v (present %v), INFO %s=%q", d.series, replica, got, ok, d.field, slave[d.field])
		}
	}
	// The figures are the linked proxy's, not zeros that agree by chance.
	if info["master_repl_offset"] != itoa(linkOffset) || info["connected_slaves"] != "1" || info["upstream_full_syncs"] != "1" {
		t.Errorf("master_repl_offset %s, connected_slaves %s, upstream_full_syncs %s: not the linked proxy's",
			info["master_repl_offset"], info["connected_slaves"], info["upstream_full_syncs"])
	}
	if up := m["replproxy_upstream_link_up"]; up != 1 || info["master_link_status"] != "up" {
		t.Errorf("link up %v in /metrics, master_link_status %s", up, info["master_link_status"])
	}
}

// TestMemoryCategoriesAddUp: replproxy_memory_bytes's categories are
// disjoint, so that their sum is used memory, in the same scrape, with a
// replica holding the stream and a snapshot in memory.
func TestMemoryCategoriesAddUp(t *testing.T) {
	h := startFakePrimary(t, (*fakeLink).goodFetch, (*fakeLink).goodFetch)
	p := startProxy(t, h.replicaOf()...)
	redistest.WaitFor(t, 10*time.Second, "proxy link up", func() bool {
		return redistest.ParseInfo(p.Info("replication"))["master_link_status"] == "up"
	})
	attachRawReplica(t, p, linkOffset+1)
	_, m := renderReport(t, p.Server, p.report(reportAll))
	var sum float64
	n := 0
	for series, v := range m {
		if strings.HasPrefix(series, "replproxy_memory_bytes{") {
			sum += v
			n++
		}
	}
	if used := m["replproxy_used_memory_bytes"]; n < 8 || sum != used || used <= 0 {
		t.Fatalf("sum of %d memory_bytes categories %v, used_memory_bytes %v", n, sum, used)
	}
}

// b2i is 1 for true and 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
