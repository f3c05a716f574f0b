package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
