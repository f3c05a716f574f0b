package metrics

import (
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// series parses Prometheus's text format into a map from series ("name" or
// `name{a="x",b="y"}`) to value.
func series(t testing.TB, body string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// scrapeFigures renders f as /metrics does.
func scrapeFigures(t testing.TB, f Figures) map[string]float64 {
	t.Helper()
	h := (&Server{Figures: func() Figures { return f }, Ready: func() (bool, string) { return true, "" }}).Handler()
	code, body := get(t, h, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	return series(t, body)
}

// TestCollectorRendersFigures: each figure lands in its series under its
// labels, with no arithmetic of the collector's own.
func TestCollectorRendersFigures(t *testing.T) {
	f := Figures{
		Version: "1.2.3", Revision: "abc", GoVersion: "go1.26",
		UpstreamLinkUp:        true,
		UpstreamLinkState:     "connected",
		UpstreamLinkStates:    []string{"none", "connecting", "connected"},
		UpstreamLastIOSeconds: 3, HasUpstreamLastIO: true,
		UpstreamFullSyncs: 2,
		MasterReplOffset:  1000,
		BacklogHistlen:    400,
		Replicas: []Replica{
			{IP: "127.0.0.1", Port: "6380", State: "online", HasLag: true, Offset: 990, LagSeconds: 1, LagBytes: 10,
				UnsentSeconds: 0.125, UnackedSeconds: 1.5},
			{IP: "127.0.0.1", Port: "6381", State: "send_bulk", Offset: 0, LagBytes: 1000, UnsentSeconds: 2.25},
		},
		RelayDelays: []Histogram{
			{Label: "inline", Bounds: []float64{0.001, 0.01}, Counts: []int64{3, 5}, Count: 6, Sum: 0.5},
			{Label: "log", Bounds: []float64{0.001, 0.01}, Counts: []int64{0, 0}},
		},
		ReplicaStates:      []string{"wait_bgsave", "send_bulk", "online"},
		ConnectedReplicas:  2,
		ReplicasClosed:     []Count{{Label: "killed", Value: 4}},
		FullSyncs:          []Count{{Label: "requested", Value: 5}},
		NetInputBytes:      123,
		Snapshot:           &Snapshot{Size: 50, AgeSeconds: 6, Offset: 600},
		LogEnabled:         true,
		LogUp:              true,
		Log:                &Log{Last: 999, Synced: 990, FsyncLagBytes: 9, LastFsyncAgeSeconds: -1},
		UsedMemory:         1 << 20,
		OverMaxMemory:      true,
		Memory:             []Count{{Label: "runtime", Value: 77}},
		ReplicationBuffers: 16 << 10,

		SnapshotSource:          "10.0.0.9:6379",
		SnapshotSourceFallback:  "no",
		SnapshotSourceFetches:   7,
		SnapshotSourceFallbacks: 2,
		SnapshotSourceFailures:  []Count{{Label: "replid", Value: 0}, {Label: "down", Value: 3}},
	}
	m := scrapeFigures(t, f)
	for s, want := range map[string]float64{
		`replproxy_build_info{goversion="go1.26",revision="abc",version="1.2.3"}`: 1,
		"replproxy_upstream_link_up":                                                            1,
		`replproxy_upstream_link_state{state="connected"}`:                                      1,
		`replproxy_upstream_link_state{state="connecting"}`:                                     0,
		"replproxy_upstream_last_io_seconds":                                                    3,
		`replproxy_upstream_syncs_total{type="full"}`:                                           2,
		"replproxy_master_repl_offset_bytes":                                                    1000,
		"replproxy_repl_backlog_histlen_bytes":                                                  400,
		"replproxy_connected_replicas":                                                          2,
		`replproxy_replica_offset_bytes{replica_ip="127.0.0.1",replica_port="6380"}`:            990,
		`replproxy_replica_lag_seconds{replica_ip="127.0.0.1",replica_port="6380"}`:             1,
		`replproxy_replica_lag_bytes{replica_ip="127.0.0.1",replica_port="6380"}`:               10,
		`replproxy_replica_unsent_age_seconds{replica_ip="127.0.0.1",replica_port="6380"}`:      0.125,
		`replproxy_replica_unacked_age_seconds{replica_ip="127.0.0.1",replica_port="6380"}`:     1.5,
		`replproxy_replica_unsent_age_seconds{replica_ip="127.0.0.1",replica_port="6381"}`:      2.25,
		`replproxy_relay_delay_seconds_bucket{path="inline",le="0.001"}`:                        3,
		`replproxy_relay_delay_seconds_bucket{path="inline",le="0.01"}`:                         5,
		`replproxy_relay_delay_seconds_bucket{path="inline",le="+Inf"}`:                         6,
		`replproxy_relay_delay_seconds_count{path="inline"}`:                                    6,
		`replproxy_relay_delay_seconds_sum{path="inline"}`:                                      0.5,
		`replproxy_relay_delay_seconds_count{path="log"}`:                                       0,
		`replproxy_replica_state{replica_ip="127.0.0.1",replica_port="6380",state="online"}`:    1,
		`replproxy_replica_state{replica_ip="127.0.0.1",replica_port="6380",state="send_bulk"}`: 0,
		`replproxy_replica_state{replica_ip="127.0.0.1",replica_port="6381",state="send_bulk"}`: 1,
		`replproxy_replicas_closed_total{reason="killed"}`:                                      4,
		`replproxy_full_syncs_total{reason="requested"}`:                                        5,
		"replproxy_net_input_bytes_total":                                                       123,
		"replproxy_snapshot_size_bytes":                                                         50,
		"replproxy_snapshot_age_seconds":                                                        6,
		"replproxy_repl_log_up":                                                                 1,
		"replproxy_repl_log_fsync_lag_bytes":                                                    9,
		"replproxy_snapshot_on_disk":                                                            0,
		"replproxy_used_memory_bytes":                                                           1 << 20,
		"replproxy_memory_over_maxmemory":                                                       1,
		`replproxy_memory_bytes{category="runtime"}`:                                            77,
		"replproxy_replication_buffers_bytes":                                                   16 << 10,
		`replproxy_snapshot_source_info{fallback="no",source="10.0.0.9:6379"}`:                  1,
		"replproxy_snapshot_source_fetches_total":                                               7,
		"replproxy_snapshot_source_fallbacks_total":                                             2,
		`replproxy_snapshot_source_failures_total{reason="replid"}`:                             0,
		`replproxy_snapshot_source_failures_total{reason="down"}`:                               3,
	} {
		if got, ok := m[s]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", s, got, ok, want)
		}
	}
	// Figures marked unknown have no series at all.
	for _, s := range []string{
		"replproxy_upstream_link_down_seconds",
		"replproxy_repl_log_last_fsync_age_seconds",
		"replproxy_snapshot_on_disk_size_bytes",
		// A replica still syncing has no offset or lag yet, whatever
		// its figures say.
		`replproxy_replica_offset_bytes{replica_ip="127.0.0.1",replica_port="6381"}`,
		`replproxy_replica_lag_seconds{replica_ip="127.0.0.1",replica_port="6381"}`,
		`replproxy_replica_lag_bytes{replica_ip="127.0.0.1",replica_port="6381"}`,
		`replproxy_replica_unacked_age_seconds{replica_ip="127.0.0.1",replica_port="6381"}`,
	} {
		if _, ok := m[s]; ok {
			t.Errorf("%s present, want absent", s)
		}
	}
}

// TestCollectorAbsentGroups: with no snapshot, no log and no snapshot on
// disk, their series are absent; the counters are there, at 0.
func TestCollectorAbsentGroups(t *testing.T) {
	m := scrapeFigures(t, Figures{})
	for _, s := range []string{"replproxy_snapshot_size_bytes", "replproxy_repl_log_bytes", "replproxy_snapshot_on_disk_offset", "replproxy_upstream_last_io_seconds"} {
		if _, ok := m[s]; ok {
			t.Errorf("%s present with nothing to show", s)
		}
	}
	for _, s := range []string{"replproxy_repl_log_enabled", "replproxy_snapshot_on_disk", "replproxy_connected_replicas", `replproxy_syncs_total{result="full"}`} {
		if got, ok := m[s]; !ok || got != 0 {
			t.Errorf("%s = %v (present %v), want 0", s, got, ok)
		}
	}
	if _, ok := m["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}
}

// TestMetricSpecsUnique: every metric is named once, so that no two
// figures share a series.
func TestMetricSpecsUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range everyMetric() {
		if seen[m.name] {
			t.Errorf("metric %s listed twice", m.name)
		}
		seen[m.name] = true
	}
}

// namedMetric is what the naming and documentation tests read of a
// metric, gauge, counter or histogram.
type namedMetric struct {
	name, typ string // typ as the metrics table writes it
	labels    []string
}

// everyMetric lists metricSpecs and histogramSpecs alike.
func everyMetric() []namedMetric {
	var out []namedMetric
	for _, m := range metricSpecs {
		typ := "gauge"
		if m.kind == counter {
			typ = "counter"
		}
		out = append(out, namedMetric{m.name, typ, m.labels})
	}
	for _, h := range histogramSpecs {
		out = append(out, namedMetric{h.name, "histogram", h.labels})
	}
	return out
}

// TestMetricNames holds every replproxy_ metric to Prometheus's naming
// rules: counters end in _total and nothing else does; figures with a unit
// carry it, in base units (an offset is a position in bytes); replica_,
// never slave_ or master_ but for master_repl_offset_bytes (INFO's name for
// the proxy's own offset); no label named after a unit.
func TestMetricNames(t *testing.T) {
	for _, m := range everyMetric() {
		total := strings.HasSuffix(m.name, "_total")
		if (m.typ == "counter") != total {
			t.Errorf("%s: counter %v, _total %v", m.name, m.typ == "counter", total)
		}
		base := strings.TrimSuffix(m.name, "_total")
		if strings.Contains(base, "slave") || (strings.HasPrefix(base, "master_") && base != "master_repl_offset_bytes") {
			t.Errorf("%s: slave_/master_ in a name (replica_, upstream_)", m.name)
		}
		for _, unitless := range []string{"offset", "histlen", "size", "age", "lag", "seconds_ago"} {
			if strings.HasSuffix(base, unitless) {
				t.Errorf("%s: no unit (_bytes, _seconds)", m.name)
			}
		}
		for _, wrong := range []string{"_ms", "_milliseconds", "_kb", "_mb", "_kib", "_mib"} {
			if strings.Contains(base, wrong) {
				t.Errorf("%s: not in base units", m.name)
			}
		}
		for _, l := range m.labels {
			if strings.Contains(l, "slave") || strings.HasSuffix(l, "_bytes") || l == "id" {
				t.Errorf("%s: label %s", m.name, l)
			}
		}
	}
}

// metricsDoc is where operators read the metrics: docs/metrics.md, whose
// table "Every metric" has a row per replproxy_ metric.
var metricsDoc = filepath.Join("..", "..", "docs", "metrics.md")

// docMetrics reads the metrics table of docs/metrics.md: each metric's name
// to its type column.
func docMetrics(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	in := false
	for line := range strings.Lines(string(doc)) {
		line = strings.TrimSpace(line)
		switch {
		case line == "| metric | type | labels | INFO, and when absent |":
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(line, "|")
			if len(cells) < 4 {
				t.Fatalf("%s: a row of the metrics table with %d cells: %s", metricsDoc, len(cells), line)
			}
			documented[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[2])
		case in:
			return documented
		}
	}
	if !in {
		t.Fatalf("%s has no metrics table", metricsDoc)
	}
	return documented
}

// TestMetricDocs: the metrics table of docs/metrics.md lists every metric
// with its type and no metric /metrics does not serve (it is the one list
// operators read), and the alerting rules in deploy/prometheus name only
// metrics that exist.
func TestMetricDocs(t *testing.T) {
	served := map[string]bool{}
	documented := docMetrics(t)
	for _, m := range everyMetric() {
		name := "replproxy_" + m.name
		served[name] = true
		typ, ok := documented[name]
		if !ok {
			t.Errorf("%s is not in the metrics table of %s", name, metricsDoc)
			continue
		}
		if typ != m.typ {
			t.Errorf("%s is a %s; the metrics table of %s says %q", name, m.typ, metricsDoc, typ)
		}
	}
	// A histogram's series are its name with _bucket, _count and _sum.
	for _, h := range histogramSpecs {
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			served["replproxy_"+h.name+suffix] = true
		}
	}
	for name := range documented {
		if !served[name] {
			t.Errorf("the metrics table of %s lists %s, which /metrics does not serve", metricsDoc, name)
		}
	}
	rules, err := os.ReadFile(filepath.Join("..", "..", "deploy", "prometheus", "replproxy-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range regexp.MustCompile(`replproxy_[a-z0-9_]+`).FindAllString(string(rules), -1) {
		if !served[name] {
			t.Errorf("the alerting rules name %s, which /metrics does not serve", name)
		}
	}
}

// fullFigures sets every figure: each group present, each Has flag set,
// each list filled, the first replica online with a link, each value
// distinct.
func fullFigures() Figures {
	return Figures{
		Version: "1.2.3", Revision: "abc", GoVersion: "go1.26",
		UpstreamLinkUp: true, UpstreamLinkState: "connected", UpstreamLinkStates: []string{"connected", "none"},
		UpstreamLastIOSeconds: 3, HasUpstreamLastIO: true, UpstreamLinkDownSeconds: 4, HasUpstreamLinkDown: true,
		UpstreamConnects: 5, UpstreamFullSyncs: 6, UpstreamPartialSyncs: 7, UpstreamLinkFailures: 8,
		UpstreamRDBBytes: 9, UpstreamChecksumFailures: 10, UpstreamStreamErrors: 11, UpstreamQueryBufferLimitDrops: 12,
		UpstreamLinkCompressed: true, UpstreamLinkRawBytes: 13, UpstreamLinkWireBytes: 14,
		UpstreamLinkDecompressCPUSeconds: 1.25, UpstreamLinkCorrupt: 15,
		MasterReplOffset: 16, SlaveReplOffset: 17, SlaveReadReplOffset: 18, BacklogFirstByteOffset: 19,
		BacklogHistlen: 20, StreamGeneration: 21,
		ConnectedReplicas: 22,
		Replicas: []Replica{
			{IP: "10.0.0.1", Port: "6380", State: "online", HasLag: true, Offset: 23, LagSeconds: 24, LagBytes: 25,
				UnsentSeconds: 0.0625, UnackedSeconds: 1.125,
				Link: &ReplicaLink{RawBytes: 26, WireBytes: 27, CompressCPUSeconds: 0.5, ThrottledSeconds: 2.75}},
			{IP: "10.0.0.2", Port: "6381", State: "send_bulk"},
		},
		ReplicaStates:   []string{"online", "send_bulk"},
		ReplicasDropped: 31, ReplicasClosed: []Count{{"killed", 32}}, ClientsClosed: []Count{{"quit", 34}},
		RelayDelays: []Histogram{{Label: "loop", Bounds: []float64{0.001, 0.01}, Counts: []int64{94, 95}, Count: 96, Sum: 0.375}},
		SyncFull:    35, SyncPartialOK: 36, SyncPartialErr: 37, FullSyncs: []Count{{"requested", 38}},
		ReplInputBytes: 40, ReplOutputBytes: 41, NetInputBytes: 42, NetOutputBytes: 43,
		ConnectionsReceived: 44, RejectedConnections: 45, CommandsProcessed: 46, ConnectedClients: 47,
		ACLAccessDeniedAuth: 48, TLSConnectionsReceived: 49, TLSHandshakeFailures: 50, MetricsAuthFailures: 92, MetricsAuthThrottled: 93,
		QueryBufferLimitDisconnections: 51, OutputBufferLimitDisconnections: 52, LinkSyncRateLimit: 53,
		Snapshot:        &Snapshot{Size: 54, AgeSeconds: 55, Offset: 56},
		SnapshotFetches: 57, SnapshotFetchFailures: 58, SnapshotFetchesByReason: []Count{{"refresh", 59}},
		SnapshotFetchBytes: 60, EvictedSnapshots: 61, EvictedBytes: 62,
		SnapshotSource: "10.0.0.9:6379", SnapshotSourceFallback: "yes",
		SnapshotSourceFetches: 89, SnapshotSourceFallbacks: 90, SnapshotSourceFailures: []Count{{"down", 91}},
		LogEnabled: true, LogUp: true,
		Log: &Log{First: 63, Last: 64, Bytes: 65, Segments: 66, Synced: 67, FsyncLagBytes: 68,
			LastFsyncAgeSeconds: 69, LagBytes: 70, LagSeconds: 0.125, Restarts: 71, Errors: 72,
			PartialSyncs: 73, ReplicasMovedToDisk: 74, RecoveredBytes: 75, RecoveryCutBytes: 76},
		SnapshotOnDisk: &DiskSnapshot{Size: 77, Offset: 78, AgeSeconds: 79},
		UsedMemory:     80, UsedMemoryPeak: 81, MaxMemory: 82, OverMaxMemory: true,
		Memory: []Count{{"runtime", 83}}, ReplicationBuffers: 85, SnapshotsOnDisk: 86,
		MemoryNotCountedForEvict: 87, MemoryCountedForEvict: 88,
	}
}

// renderSpecs is every series metricSpecs and histogramSpecs make of f, by
// name and label values.
func renderSpecs(f Figures) map[string]float64 {
	out := map[string]float64{}
	for _, m := range metricSpecs {
		m.series(&f, func(v float64, labelValues ...string) {
			out[m.name+"{"+strings.Join(labelValues, ",")+"}"] = v
		})
	}
	for _, h := range histogramSpecs {
		for _, x := range h.series(&f) {
			for i, b := range x.Bounds {
				out[h.name+"_bucket{"+x.Label+",le="+strconv.FormatFloat(b, 'g', -1, 64)+"}"] = float64(x.Counts[i])
			}
			out[h.name+"_count{"+x.Label+"}"] = float64(x.Count)
			out[h.name+"_sum{"+x.Label+"}"] = x.Sum
		}
	}
	return out
}

// TestMetricSpecsHaveSeries: every metric of the table takes its series
// from the figures, with a value for each of its labels, and with every
// figure set it shows at least one: no metric is listed without a figure.
func TestMetricSpecsHaveSeries(t *testing.T) {
	f := fullFigures()
	for _, m := range metricSpecs {
		if m.series == nil {
			t.Errorf("%s: no series", m.name)
			continue
		}
		n := 0
		m.series(&f, func(v float64, labelValues ...string) {
			n++
			if len(labelValues) != len(m.labels) {
				t.Errorf("%s: label values %q for labels %q", m.name, labelValues, m.labels)
			}
		})
		if n == 0 {
			t.Errorf("%s: no series with every figure set", m.name)
		}
	}
	for _, h := range histogramSpecs {
		xs := h.series(&f)
		if len(xs) == 0 {
			t.Errorf("%s: no series with every figure set", h.name)
		}
		for _, x := range xs {
			if len(x.Bounds) == 0 || len(x.Counts) != len(x.Bounds) || len(h.labels) != 1 {
				t.Errorf("%s: %d bounds, %d counts, labels %q", h.name, len(x.Bounds), len(x.Counts), h.labels)
			}
		}
	}
}

// TestEveryFigureRendered: a change of any one figure (any field of
// Figures, of its groups, of its first replica and of a list's first
// entry) changes what /metrics shows: no figure is left without a metric.
func TestEveryFigureRendered(t *testing.T) {
	full := fullFigures()
	base := renderSpecs(full)
	var walk func(v reflect.Value, path []int, name string)
	walk = func(v reflect.Value, path []int, name string) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				t.Fatalf("fullFigures leaves %s nil", name)
			}
			walk(v.Elem(), path, name)
		case reflect.Slice:
			if v.Len() == 0 {
				t.Fatalf("fullFigures leaves %s empty", name)
			}
			if v.Type().Elem().Kind() == reflect.String {
				checkFigureRendered(t, base, path, name)
				return
			}
			walk(v.Index(0), path, name+"[0]")
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i), append(slices.Clone(path), i), name+"."+v.Type().Field(i).Name)
			}
		default:
			checkFigureRendered(t, base, path, name)
		}
	}
	walk(reflect.ValueOf(full), nil, "Figures")
}

// checkFigureRendered changes the figure at path in a fresh fullFigures
// and reports it when the series stay those of base.
func checkFigureRendered(t *testing.T, base map[string]float64, path []int, name string) {
	t.Helper()
	f := fullFigures()
	// into follows pointers and takes a slice's first entry.
	into := func(v reflect.Value) reflect.Value {
		for v.Kind() == reflect.Pointer || (v.Kind() == reflect.Slice && v.Type().Elem().Kind() != reflect.String) {
			if v.Kind() == reflect.Pointer {
				v = v.Elem()
			} else {
				v = v.Index(0)
			}
		}
		return v
	}
	v := reflect.ValueOf(&f).Elem()
	for _, i := range path {
		v = into(v).Field(i)
	}
	v = into(v)
	switch v.Kind() {
	case reflect.Slice: // of strings: the first
		v.Index(0).SetString(v.Index(0).String() + "_changed")
	case reflect.String:
		v.SetString(v.String() + "_changed")
	case reflect.Int64:
		v.SetInt(v.Int() + 1000)
	case reflect.Float64:
		v.SetFloat(v.Float() + 0.5)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	default:
		t.Fatalf("%s: a figure of kind %s", name, v.Kind())
	}
	if maps.Equal(renderSpecs(f), base) {
		t.Errorf("%s is in no metric's series", name)
	}
}
