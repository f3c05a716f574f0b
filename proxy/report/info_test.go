package report

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/snapshots"
	"github.com/replproxy/replproxy/proxy/upstream"
)

// info writes the named sections of r and returns their "key:value" lines
// as a map.
func info(r *Report, sections ...string) map[string]string {
	var b strings.Builder
	for _, sec := range sections {
		r.WriteInfoSection(&b, sec)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(b.String(), "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			fields[k] = v
		}
	}
	return fields
}

// TestInfoDerivedFields: what INFO derives from a report's figures, for a
// proxy syncing from a primary that was never up, with a downstream proxy
// between two plain replicas and a stream log that could not be opened:
// the sync's progress, the link's times, linkN counting the downstream
// proxies alone, the ratios, and the log's failure.
func TestInfoDerivedFields(t *testing.T) {
	now := time.Unix(1700000000, 0)
	cfg := config.DefaultConfig()
	cfg.MasterHost, cfg.MasterPort = "10.1.2.3", 6380
	r := &Report{
		Now: now, Config: cfg,
		Up: upstream.Status{State: upstream.StateSync, LastIO: now.Add(-3 * time.Second).UnixNano(),
			Applied: 990, SyncTotal: 4000, SyncRead: 1000},
		Offset: 1000, Filled: 1003, StreamSince: -1,
		Replicas: []Replica{
			{IP: "10.0.0.1", Port: 6379, State: downstream.Online, Offset: 900, Lag: 2,
				Unsent: 1234567 * time.Nanosecond, Unacked: 412345 * time.Microsecond},
			{IP: "10.0.0.2", Port: 6379, State: downstream.Online,
				Link: &Link{Compression: "zstd", Raw: 4096, Wire: 1024, CPU: 0.25, KBps: 1.5, Throttled: 1500 * time.Millisecond}},
			{IP: "10.0.0.3", Port: 6379, State: downstream.SendBulk},
		},
		UpLink: UpstreamLink{Link: Link{Compression: "refused", Raw: 10}, FetchRaw: 44, FetchWire: 22},
		Log:    Log{Enabled: true, OpenErr: "no such directory"},
	}
	got := info(r, InfoSections...)
	for key, want := range map[string]string{
		"role":                            "slave",
		"master_link_status":              "down",
		"master_last_io_seconds_ago":      "3",
		"master_sync_in_progress":         "1",
		"master_sync_left_bytes":          "3000",
		"master_sync_perc":                "25.00",
		"master_sync_last_io_seconds_ago": "3",
		"master_link_down_since_seconds":  "-1",
		"slave_read_repl_offset":          "1003",
		"slave_repl_offset":               "990",
		"connected_slaves":                "3",
		// Redis's fields as Redis writes them, then the delays in
		// milliseconds to the microsecond.
		"slave0": "ip=10.0.0.1,port=6379,state=online,offset=900,lag=2,unsent_ms=1.235,unacked_ms=412.345",
		"slave2": "ip=10.0.0.3,port=6379,state=send_bulk,offset=0,lag=0,unsent_ms=0.000,unacked_ms=0.000",
		"upstream_link": "compression=refused,raw_bytes=10,wire_bytes=0,ratio=1.00,cpu_sec=0.000," +
			"fetch_raw_bytes=44,fetch_wire_bytes=22,fetch_cpu_sec=0.000,input_kbps=0.00",
		"link0": "ip=10.0.0.2,port=6379,compression=zstd,raw_bytes=4096,wire_bytes=1024,ratio=4.00," +
			"cpu_sec=0.250,output_kbps=1.50,throttled_ms=1500",
		"repl_log_enabled":           "1",
		"repl_log_status":            "failed",
		"repl_log_last_error":        "no such directory",
		"repl_snapshot_on_disk":      "0",
		"repl_snapshot_stream_since": "-1",
		"snapshot_state":             "none",
		"tcp_port":                   "6379",
	} {
		if got[key] != want {
			t.Errorf("%s:%s, want %s", key, got[key], want)
		}
	}
	if v, ok := got["link1"]; ok {
		t.Errorf("link1:%s; only one replica is a downstream proxy", v)
	}

	// A proxy that is its own primary shows none of the link's fields.
	r.Config = config.DefaultConfig()
	got = info(r, "replication", "links")
	for _, key := range []string{"master_host", "master_link_status", "master_last_io_seconds_ago", "upstream_link"} {
		if v, ok := got[key]; ok {
			t.Errorf("%s:%s with no primary", key, v)
		}
	}
	if got["role"] != "master" {
		t.Errorf("role:%s with no primary, want master", got["role"])
	}
}

// TestInfoUnknownSection: a section INFO does not have writes nothing.
func TestInfoUnknownSection(t *testing.T) {
	var b strings.Builder
	(&Report{Config: config.DefaultConfig()}).WriteInfoSection(&b, "nosuchsection")
	if b.Len() != 0 {
		t.Errorf("INFO nosuchsection wrote %q", b.String())
	}
}

// TestInfoSnapshotSource: INFO proxy's snapshot_source_* fields, right
// after the snapshot_fetch_* ones, name the source in force (primary by
// default, host:port once snapshot-from names one) and its counters, a
// failure field per reason in snapshots.SourceReasons' order; /metrics'
// figures carry the same values, every reason's series included at 0.
func TestInfoSnapshotSource(t *testing.T) {
	r := &Report{Config: config.DefaultConfig()}
	got := info(r, "proxy")
	for key, want := range map[string]string{
		"snapshot_source":                  "primary",
		"snapshot_source_fallback":         "yes",
		"snapshot_source_fetches":          "0",
		"snapshot_source_fallbacks":        "0",
		"snapshot_source_failures_replid":  "0",
		"snapshot_source_failures_behind":  "0",
		"snapshot_source_failures_ahead":   "0",
		"snapshot_source_failures_down":    "0",
		"snapshot_source_failures_refused": "0",
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s:%s (present %v), want %s", key, v, ok, want)
		}
	}
	f := r.Figures()
	if f.SnapshotSource != "primary" || f.SnapshotSourceFallback != "yes" {
		t.Errorf("figures source %q fallback %q, want primary and yes", f.SnapshotSource, f.SnapshotSourceFallback)
	}

	cfg := config.DefaultConfig()
	cfg.SnapshotFromHost, cfg.SnapshotFromPort, cfg.SnapshotFromFallback = "::1", 6380, false
	r = &Report{Config: cfg}
	r.Stats.Source = snapshots.SourceCounts{Fetches: 5, Fallbacks: 2, Failures: [len(snapshots.SourceReasons)]int64{1, 2, 5, 3, 4}}
	var b strings.Builder
	r.WriteInfoSection(&b, "proxy")
	text := b.String()
	want := "snapshot_fetch_bytes:0\r\n" +
		"snapshot_source:[::1]:6380\r\n" +
		"snapshot_source_fallback:no\r\n" +
		"snapshot_source_fetches:5\r\n" +
		"snapshot_source_fallbacks:2\r\n" +
		"snapshot_source_failures_replid:1\r\n" +
		"snapshot_source_failures_behind:2\r\n" +
		"snapshot_source_failures_ahead:5\r\n" +
		"snapshot_source_failures_down:3\r\n" +
		"snapshot_source_failures_refused:4\r\n" +
		"sync_full_"
	if !strings.Contains(text, want) {
		t.Errorf("INFO proxy lacks, in this order:\n%q\ngot:\n%s", want, text)
	}

	f = r.Figures()
	if f.SnapshotSource != "[::1]:6380" || f.SnapshotSourceFallback != "no" ||
		f.SnapshotSourceFetches != 5 || f.SnapshotSourceFallbacks != 2 {
		t.Errorf("figures source %q fallback %q fetches %d fallbacks %d, want INFO's",
			f.SnapshotSource, f.SnapshotSourceFallback, f.SnapshotSourceFetches, f.SnapshotSourceFallbacks)
	}
	if len(f.SnapshotSourceFailures) != len(snapshots.SourceReasons) {
		t.Fatalf("figures failures %v, want one per reason of %v", f.SnapshotSourceFailures, snapshots.SourceReasons)
	}
	fields := info(r, "proxy")
	for _, c := range f.SnapshotSourceFailures {
		if v := fields["snapshot_source_failures_"+c.Label]; v != strconv.FormatInt(c.Value, 10) {
			t.Errorf("figures failures{reason=%q} %d, INFO snapshot_source_failures_%s:%s", c.Label, c.Value, c.Label, v)
		}
	}
}

// TestHumanBytes: the *_human fields are written as Redis's bytesToHuman
// writes them: "<n>B" below 1024, else two decimals and K, M, G, T or P.
func TestHumanBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0B"}, {-5, "0B"}, {1023, "1023B"}, {1024, "1.00K"}, {1536, "1.50K"}, {1048575, "1024.00K"},
		{1048576, "1.00M"}, {1342177, "1.28M"}, {3 << 30, "3.00G"}, {5 << 40, "5.00T"}, {7 << 50, "7.00P"},
		{1 << 60, "1152921504606846976B"},
	} {
		if got := humanBytes(tc.n); got != tc.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
