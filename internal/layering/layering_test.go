package layering

import (
	"go/build"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is the module path every package of replproxy starts with.
const module = "github.com/replproxy/replproxy"

// allowed lists, for each package of the module (by its path within the
// module), the packages of the module its non-test files may import. An
// entry ending in "/..." allows that folder and everything below it.
var allowed = map[string][]string{
	"replid":    {},
	"rdbcheck":  {},
	"replbuf":   {"rdbcheck"},
	"eviction":  {"replbuf"},
	"streamlog": {"internal/safefile", "replid"},

	"proxy/wire":        {},
	"proxy/config":      {"eviction", "proxy/clustertopo", "proxy/wire"},
	"proxy/upstream":    {"rdbcheck", "replbuf", "proxy/wire", "replid", "proxy/linkzstd"},
	"proxy/linkzstd":    {},
	"proxy/metrics":     {},
	"proxy/commanddocs": {"proxy/wire"},
	"proxy/sysmem":      {},
	"proxy/tlsconf":     {"proxy/config"},
	"proxy/webconfig":   {},
	"proxy/listen":      {},
	"proxy/clientlist":  {"proxy/wire"},
	"proxy/clustertopo": {"proxy/wire"},
	// The follower decides and returns; proxy acts on its decisions, so
	// neither proxy nor upstream is in its row.
	"proxy/clusterwatch": {"proxy/clustertopo"},
	"proxy/acl":          {"proxy/wire"},
	"proxy/snapfile":     {"internal/safefile", "rdbcheck", "replbuf", "replid"},
	"proxy/history":      {"eviction", "proxy/snapfile", "replbuf", "replid", "streamlog"},
	// The snapshot work is where the main link delivers its payloads and
	// seeds (it is upstream's Snapshots, so upstream is in its row, never
	// the other way); it reaches the link's side links and the server
	// through interfaces it declares (Source, Host), so proxy is not.
	"proxy/snapshots": {"proxy/history", "proxy/snapfile", "proxy/upstream", "proxy/wire", "rdbcheck", "replbuf", "replid"},
	// The replica reads its plan's snapshot file (history.Plan.Spilled)
	// through history's types without naming snapfile, so snapfile is not
	// in its row.
	"proxy/downstream": {"proxy/history", "proxy/wire", "replbuf", "replid", "streamlog", "proxy/linkzstd"},
	// The report is built by proxy and rendered here from the parts'
	// types alone: proxy is not in its row.
	"proxy/report": {
		"eviction", "proxy/clustertopo", "proxy/config", "proxy/downstream", "proxy/history", "proxy/metrics", "proxy/snapshots",
		"proxy/sysmem", "proxy/upstream", "replbuf", "streamlog",
	},
	// Pub/Sub returns its verdict on a subscriber's output (Over) for proxy
	// to turn into a close reason: downstream is not in its row.
	"proxy/pubsub": {"proxy/config", "proxy/wire"},
	"proxy": {
		"eviction", "proxy/acl", "proxy/clientlist", "proxy/clustertopo", "proxy/clusterwatch", "proxy/commanddocs", "proxy/config", "proxy/downstream", "proxy/history", "proxy/listen", "proxy/metrics", "proxy/pubsub", "proxy/report",
		"proxy/snapfile", "proxy/snapshots", "proxy/sysmem", "proxy/tlsconf", "proxy/upstream", "proxy/webconfig", "proxy/wire", "replbuf", "replid", "streamlog",
	},
	// The set of per-shard servers of cluster-shard all: it reads the
	// topology itself and assembles servers, never their parts.
	"proxy/clusterset": {"internal/safefile", "proxy", "proxy/clustertopo", "proxy/config", "proxy/upstream"},
	"cmd/replproxy":    {"proxy", "proxy/clusterset", "proxy/config", "proxy/wire"},

	"internal/cachedata": {},
	// The chaos harness's pure part: the fault table, the nemesis's
	// choice, the checkers, the history and the report, with no process
	// or network of its own.
	"internal/chaos": {},
	// The chaos harness's live part: the deployment it starts (real
	// servers through internal/redistest, regions through internal/netns),
	// the load (internal/cachedata), the faults applied and the observers.
	// It is a test harness (testHarnesses).
	"internal/chaos/deploy": {"internal/cachedata", "internal/chaos", "internal/netns", "internal/redistest"},
	"internal/layering":     {},
	"internal/netns":        {},
	"internal/redistest":    {},
	"internal/safefile":     {},

	// bench/ is a module of its own (bench/go.mod), walked here all the
	// same: it builds cmd/replproxy and runs replbuf's benchmarks as
	// commands, so its packages may import bench/... alone; but for its
	// regions section, which builds two regions with internal/netns and
	// writes internal/cachedata's stream (through a replace of the main
	// module in bench/go.mod).
	"bench":                   {"bench/...", "internal/cachedata", "internal/netns"},
	"bench/internal/cluster":  {"bench/..."},
	"bench/internal/gobench":  {"bench/..."},
	"bench/internal/load":     {"bench/..."},
	"bench/internal/probe":    {},
	"bench/internal/procstat": {"bench/..."},
	"bench/internal/sample":   {"bench/..."},
}

// testHarnesses are the packages whose code runs only under go test: the
// real servers of internal/redistest, and the chaos deployment built on
// them. Each fails the test that calls it rather than returning errors, so
// nothing but tests and other harnesses imports one: the product never
// links a harness.
var testHarnesses = []string{"internal/redistest", "internal/chaos/deploy"}

// allows reports whether rule allows an import of pkg.
func allows(rule []string, pkg string) bool {
	for _, a := range rule {
		if a == pkg {
			return true
		}
		if dir, ok := strings.CutSuffix(a, "/..."); ok && (pkg == dir || strings.HasPrefix(pkg, dir+"/")) {
			return true
		}
	}
	return false
}

// top returns a package's first path element: "cmd" for cmd/replproxy.
func top(pkg string) string { first, _, _ := strings.Cut(pkg, "/"); return first }

// modulePackages reads every package of the module below root: its path
// within the module, its non-test imports and its tests' imports, each
// limited to the module's own packages.
func modulePackages(t *testing.T, root string) map[string][2][]string {
	t.Helper()
	pkgs := map[string][2][]string{}
	err := filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); dir != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		p, err := build.Default.ImportDir(dir, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		own := func(imports ...[]string) []string {
			var out []string
			for _, imp := range slices.Concat(imports...) {
				if pkg, ok := strings.CutPrefix(imp, module+"/"); ok && !slices.Contains(out, pkg) {
					out = append(out, pkg)
				}
			}
			return out
		}
		pkgs[filepath.ToSlash(rel)] = [2][]string{own(p.Imports), own(p.TestImports, p.XTestImports)}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// TestLayering fails on an import the table does not allow.
func TestLayering(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module's root is not two folders up: %v", err)
	}
	pkgs := modulePackages(t, root)
	for _, want := range []string{"replbuf", "proxy", "cmd/replproxy"} {
		if _, ok := pkgs[want]; !ok {
			t.Fatalf("package %s not found below %s: the walk found %d packages", want, root, len(pkgs))
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(pkgs)) {
		imports, testImports := pkgs[pkg][0], pkgs[pkg][1]
		rule, ok := allowed[pkg]
		if !ok {
			t.Errorf("package %s is not in the layering table: add it to allowed, with what it may import", pkg)
			continue
		}
		for _, imp := range imports {
			if !allows(rule, imp) {
				t.Errorf("%s imports %s, which the layering does not allow", pkg, imp)
			}
		}
		// Tests may use any lower package, but never cmd/ or bench/ from
		// outside them, and a test harness only from tests and other
		// harnesses.
		for _, imp := range slices.Concat(imports, testImports) {
			if (top(imp) == "cmd" || top(imp) == "bench") && top(imp) != top(pkg) {
				t.Errorf("%s imports %s: nothing outside %s/ may", pkg, imp, top(imp))
			}
		}
		if !slices.Contains(testHarnesses, pkg) {
			for _, imp := range imports {
				if slices.Contains(testHarnesses, imp) {
					t.Errorf("%s imports %s outside its tests: only tests and the test harnesses (%q) may", pkg, imp, testHarnesses)
				}
			}
		}
	}
	for pkg := range allowed {
		if _, ok := pkgs[pkg]; !ok {
			t.Errorf("the layering table names %s, which is no package: remove it", pkg)
		}
	}
	for _, pkg := range testHarnesses {
		if _, ok := pkgs[pkg]; !ok {
			t.Errorf("testHarnesses names %s, which is no package: remove it", pkg)
		}
	}
}
