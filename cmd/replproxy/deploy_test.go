package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/replproxy/replproxy/proxy/config"
)

// TestKubernetesExamples keeps deploy/kubernetes true to what its README
// says: each StatefulSet's governing Service (serviceName) is headless, and
// the monitoring port is 9379 everywhere (metrics-port in the ConfigMap, the
// container's metrics port), never 9121, redis_exporter's default, which
// runs beside Redis pods often enough to collide. Text checks, not a YAML
// parser: the files are small and regular.
func TestKubernetesExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "deploy", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Kubernetes examples: %v", err)
	}
	serviceName := regexp.MustCompile(`(?m)^  serviceName: (\S+)$`)
	name := regexp.MustCompile(`(?m)^  name: (\S+)$`)
	port9121 := regexp.MustCompile(`(?i)port:? 9121\b`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if port9121.MatchString(text) {
			t.Errorf("%s: port 9121 (redis_exporter's default)", f)
		}
		if !strings.Contains(text, "metrics-port 9379") || !strings.Contains(text, "containerPort: 9379") {
			t.Errorf("%s: metrics-port and the metrics containerPort are not 9379", f)
		}
		headless := map[string]bool{}
		var governing []string
		for _, doc := range strings.Split(text, "\n---\n") {
			switch {
			case strings.Contains(doc, "\nkind: Service\n"):
				if m := name.FindStringSubmatch(doc); m != nil {
					headless[m[1]] = strings.Contains(doc, "\n  clusterIP: None\n")
				}
			case strings.Contains(doc, "\nkind: StatefulSet\n"):
				m := serviceName.FindStringSubmatch(doc)
				if m == nil {
					t.Errorf("%s: a StatefulSet without serviceName", f)
					continue
				}
				governing = append(governing, m[1])
			}
		}
		if len(governing) == 0 {
			t.Errorf("%s: no StatefulSet", f)
		}
		for _, svc := range governing {
			if h, ok := headless[svc]; !ok || !h {
				t.Errorf("%s: the StatefulSet's Service %s is not a headless Service of the file (present %v)", f, svc, ok)
			}
		}
	}
}

// TestRegionsConfigs keeps deploy/regions true to what its README says:
// every proxy configuration parses and validates as replproxy reads it
// (every directive exists, every value is in range); proxy A serves TLS with
// client certificates, allows compression and caps full syncs, with no soft
// output limit that would drop a proxy in the middle of a capped sync; the
// region-B proxies reach proxy A's TLS port over TLS and ask for
// compression, and the two are alike but for their address and
// certificate, so that replicas can move between them.
func TestRegionsConfigs(t *testing.T) {
	dir := filepath.Join("..", "..", "deploy", "regions")
	parse := func(name string) *config.Config {
		t.Helper()
		c, err := config.Parse([]string{filepath.Join(dir, name)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return c
	}
	a := parse("region-a/proxy-a.conf")
	if a.TLSPort == 0 || a.TLSAuthClients != config.TLSAuthYes || !a.ReplLinkCompressionAllow || a.ReplLinkSyncRateLimit <= 0 {
		t.Errorf("proxy A: tls-port %d, tls-auth-clients %s, repl-link-compression-allow %v, repl-link-sync-rate-limit %d; want TLS with client certificates, compression allowed, a cap",
			a.TLSPort, a.TLSAuthClients, a.ReplLinkCompressionAllow, a.ReplLinkSyncRateLimit)
	}
	if l := a.ClientOutputBufferLimit.Replica; l.Soft != 0 || l.Hard < a.ReplLogSize {
		t.Errorf("proxy A: client-output-buffer-limit replica %+v; want no soft limit and a hard one of at least repl-log-size (%d)", l, a.ReplLogSize)
	}
	if a.ReplLogSize == 0 {
		t.Error("proxy A: no stream log: region B could not ride out a WAN outage")
	}
	b, b2 := parse("region-b/proxy-b.conf"), parse("region-b/proxy-b2.conf")
	for name, c := range map[string]*config.Config{"proxy B": b, "proxy B2": b2} {
		if c.MasterPort != a.TLSPort || !c.TLSReplication || c.ReplLinkCompression != config.LinkCompressionZstd || c.MasterAuth != a.RequirePass {
			t.Errorf("%s: replicaof port %d, tls-replication %v, repl-link-compression %s; want proxy A's tls-port %d over TLS, zstd, masterauth proxy A's requirepass",
				name, c.MasterPort, c.TLSReplication, c.ReplLinkCompression, a.TLSPort)
		}
	}
	same := *b2
	same.TLSCertFile, same.TLSKeyFile, same.MetricsBind = b.TLSCertFile, b.TLSKeyFile, b.MetricsBind
	if !reflect.DeepEqual(&same, b) {
		t.Error("proxy B2 differs from proxy B beyond its certificate and metrics address")
	}
}
