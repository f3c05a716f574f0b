package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the repository's root, two folders up, with its go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module's root is not two folders up: %v", err)
	}
	return root
}

// readRepoFile reads a file of the repository by its path in it.
func readRepoFile(t *testing.T, root, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// walkRepo calls f for every file below root but .git's, by its path in
// the repository.
func walkRepo(t *testing.T, root string, f func(rel string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		f(filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPackageMapParsed(t *testing.T) {
	md := "# A\n\n## Package map\n\nIntro with `not/a/row`.\n\n" +
		"| package | its job | may import |\n|---|---|---|\n" +
		"| `a` | does `x` | nothing of the module |\n" +
		"| `b/c/` | more | `a`, `d/...` |\n\n" +
		"| path | what it is |\n|---|---|\n| `scripts/` | not a package |\n\n" +
		"| package | its job | may import |\n|---|---|---|\n| `e` | again | `a` |\n| `a` | twice | |\n\n" +
		"## Next\n\n| package | its job | may import |\n|---|---|---|\n| `f` | after the section | |\n"
	got, dup := packageMap(md)
	want := map[string][]string{"a": nil, "b/c": {"a", "d/..."}, "e": {"a"}}
	if len(got) != len(want) {
		t.Errorf("packageMap = %q, want %q", got, want)
	}
	for pkg, imports := range want {
		if g, ok := got[pkg]; !ok || !slices.Equal(g, imports) {
			t.Errorf("packageMap[%q] = %q, %v; want %q", pkg, g, ok, imports)
		}
	}
	if !slices.Equal(dup, []string{"a"}) {
		t.Errorf("duplicates %q, want [a]", dup)
	}
}

// TestPackageMap fails when docs/architecture.md's package map leaves out a
// package of the module (or of bench/), names one that does not exist, or
// gives a package other imports than the layering table allows it.
func TestPackageMap(t *testing.T) {
	root := repoRoot(t)
	pkgs := modulePackages(t, root)
	doc, dup := packageMap(readRepoFile(t, root, "docs/architecture.md"))
	if len(doc) < 10 {
		t.Fatalf("docs/architecture.md's package map has %d rows: it was not found, or not read", len(doc))
	}
	for _, pkg := range dup {
		t.Errorf("docs/architecture.md's package map names %s twice", pkg)
	}
	for _, pkg := range slices.Sorted(maps.Keys(pkgs)) {
		imports, ok := doc[pkg]
		if !ok {
			t.Errorf("package %s is not in docs/architecture.md's package map: add its row (its job, and what it may import: %q)", pkg, allowed[pkg])
			continue
		}
		if want := slices.Sorted(slices.Values(allowed[pkg])); !slices.Equal(slices.Sorted(slices.Values(imports)), want) {
			t.Errorf("docs/architecture.md says %s may import %q; the layering table allows %q", pkg, imports, want)
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(doc)) {
		if _, ok := pkgs[pkg]; !ok {
			t.Errorf("docs/architecture.md's package map names %s, which is no package: remove its row", pkg)
		}
	}
}

func TestFuzzListParsed(t *testing.T) {
	md := "# T\n\n## Other\n\n- `x`: `FuzzNot`.\n\n## Fuzzing\n\nTargets:\n\n" +
		"- `replbuf`: `FuzzStream`.\n" +
		"- `proxy/wire`: `FuzzA`, `FuzzB`: what\n  they do, and `FuzzC`\n  too.\n" +
		"Not an item: `FuzzD`.\n- `proxy/wire/`: `FuzzE`.\n"
	got := fuzzList(md)
	want := map[string][]string{"replbuf": {"FuzzStream"}, "proxy/wire": {"FuzzA", "FuzzB", "FuzzC", "FuzzE"}}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("fuzzList = %q, want %q", got, want)
	}
	mk := "fuzz: redis\n" +
		"\t$(GO) test -run '^$$' -fuzz '^FuzzStream$$' -fuzztime $(FUZZTIME) ./replbuf/\n" +
		"\t$(GO) test -run '^$$' -fuzz FuzzStreamScanner -fuzztime $(FUZZTIME) ./proxy/wire/\n" +
		"\t$(GO) test -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./proxy/linkzstd/\n" +
		"\t$(GO) test -race ./...\n"
	gotMk := makeFuzzTargets(mk)
	wantMk := map[string][]string{"replbuf": {"FuzzStream"}, "proxy/wire": {"FuzzStreamScanner"}, "proxy/linkzstd": {"FuzzReader"}}
	if !maps.EqualFunc(gotMk, wantMk, slices.Equal) {
		t.Errorf("makeFuzzTargets = %q, want %q", gotMk, wantMk)
	}
}

// fuzzTargets returns the fuzz targets of the module below root, by the
// package's path: every top-level func FuzzXxx(*testing.F) of a test file.
func fuzzTargets(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	walkRepo(t, root, func(rel string) {
		if !strings.HasSuffix(rel, "_test.go") || strings.Contains("/"+rel, "/testdata/") {
			return
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, filepath.FromSlash(rel)), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fuzzName.MatchString(fd.Name.Name) || fd.Type.Params.NumFields() != 1 {
				continue
			}
			if star, ok := fd.Type.Params.List[0].Type.(*ast.StarExpr); !ok {
				continue
			} else if sel, ok := star.X.(*ast.SelectorExpr); !ok || sel.Sel.Name != "F" {
				continue
			}
			pkg := filepath.ToSlash(filepath.Dir(rel))
			out[pkg] = append(out[pkg], fd.Name.Name)
		}
	})
	return out
}

// TestFuzzTargetsListed fails when a fuzz target of the module is missing
// from docs/testing.md's list (under its package) or from the Makefile's
// fuzz target, or when either names a target that does not exist there.
func TestFuzzTargetsListed(t *testing.T) {
	root := repoRoot(t)
	targets := fuzzTargets(t, root)
	n := 0
	for _, names := range targets {
		n += len(names)
	}
	if n < 10 {
		t.Fatalf("found %d fuzz targets below %s: the walk went wrong", n, root)
	}
	for _, where := range []struct {
		file   string
		listed map[string][]string
	}{
		{"docs/testing.md", fuzzList(readRepoFile(t, root, "docs/testing.md"))},
		{"Makefile", makeFuzzTargets(readRepoFile(t, root, "Makefile"))},
	} {
		for _, pkg := range slices.Sorted(maps.Keys(targets)) {
			for _, name := range targets[pkg] {
				if !slices.Contains(where.listed[pkg], name) {
					t.Errorf("%s does not list the fuzz target %s of %s", where.file, name, pkg)
				}
			}
		}
		for _, pkg := range slices.Sorted(maps.Keys(where.listed)) {
			for _, name := range where.listed[pkg] {
				if !slices.Contains(targets[pkg], name) {
					t.Errorf("%s lists %s under %s, which has no such fuzz target", where.file, name, pkg)
				}
			}
		}
	}
}

func TestMarkdownLinksParsed(t *testing.T) {
	md := "See [a](a.md), [b](../b/c.md#x \"title\"), [web](https://example.com), ![img](p.png)\n" +
		"and [here](#top), [mail](mailto:x@y).\n```\n[not](inside.md)\n```\n"
	if got, want := markdownLinks(md), []string{"a.md", "../b/c.md#x", "p.png", "#top"}; !slices.Equal(got, want) {
		t.Errorf("markdownLinks = %q, want %q", got, want)
	}
	anchors := headingAnchors("# Top\n## Against the stream log's goals\n### 1. Full syncs at once\n" +
		"## `proxy/` and TLS: what's new?\n## Top\n```\n# not a heading\n```\n#nospace\n")
	for _, want := range []string{"top", "against-the-stream-logs-goals", "1-full-syncs-at-once", "proxy-and-tls-whats-new", "top-1"} {
		if !anchors[want] {
			t.Errorf("headingAnchors lacks %q: %v", want, anchors)
		}
	}
	if len(anchors) != 5 {
		t.Errorf("headingAnchors = %v, want 5", anchors)
	}
}

// TestMarkdownLinks fails on a relative link of a Markdown file of the
// repository that names no file, or a heading its file does not have.
func TestMarkdownLinks(t *testing.T) {
	root := repoRoot(t)
	anchorsOf := map[string]map[string]bool{}
	anchors := func(rel string) map[string]bool {
		if a, ok := anchorsOf[rel]; ok {
			return a
		}
		a := headingAnchors(readRepoFile(t, root, rel))
		anchorsOf[rel] = a
		return a
	}
	checked := 0
	walkRepo(t, root, func(rel string) {
		if !strings.HasSuffix(rel, ".md") {
			return
		}
		for _, link := range markdownLinks(readRepoFile(t, root, rel)) {
			checked++
			target, anchor, _ := strings.Cut(link, "#")
			dest := rel
			if target != "" {
				dest = filepath.ToSlash(filepath.Join(filepath.Dir(rel), target))
			}
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
				t.Errorf("%s links %s: no such file", rel, link)
				continue
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !anchors(dest)[anchor] {
				t.Errorf("%s links %s: %s has no heading #%s", rel, link, dest, anchor)
			}
		}
	})
	if checked < 50 {
		t.Fatalf("checked %d links below %s: the walk went wrong", checked, root)
	}
}

func TestIssueNumberFound(t *testing.T) {
	// Each citation is split by a "+", so that this file cites none.
	for _, s := range []string{"issue " + "36's harness", "(issue " + "46)", "Issue #" + "47", "issues " + "34 and 35", "see (#" + "47)", "ISSUE " + "7", "issue" + "36"} {
		if !issueNumber.MatchString(s) {
			t.Errorf("issueNumber misses %q", s)
		}
	}
	for _, s := range []string{"\"#00\"", "as the issue asks", "tissue 5", "[x](#1-full-syncs-at-once)", "color: #ff0000", "p.Issue(t, name)", "issues tickets"} {
		if issueNumber.MatchString(s) {
			t.Errorf("issueNumber matches %q", s)
		}
	}
	for path, want := range map[string]bool{
		"proxy/doc.go": true, "docs/testing.md": true, "Makefile": true, "deploy/systemd/replproxy.service": true,
		"testdata/replproxy.conf": true, ".ci/run": true, "bench/go.mod": true,
		"proxy/testdata/fuzz/FuzzDifferential/0a39475ab73041bf": false, "bench/chart-engine.png": false, "rdbcheck/testdata/a.rdb": false,
		"replproxy": false, "LICENSE": false, ".gitignore": false,
	} {
		if got := issueChecked(path); got != want {
			t.Errorf("issueChecked(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestNoIssueNumbers fails when a file of the repository cites an issue by
// its number (issueNumber): comments and docs say what the code is now, and
// why it changed belongs to the commit that changed it. issueNumbersLeft
// lists the files not reworded yet, each with why.
func TestNoIssueNumbers(t *testing.T) {
	root := repoRoot(t)
	checked, cites := 0, map[string]bool{}
	walkRepo(t, root, func(rel string) {
		if !issueChecked(rel) {
			return
		}
		checked++
		for i, line := range strings.Split(readRepoFile(t, root, rel), "\n") {
			m := issueNumber.FindString(line)
			if m == "" {
				continue
			}
			cites[rel] = true
			if _, ok := issueNumbersLeft[rel]; !ok {
				t.Errorf("%s:%d cites %q: say what the code is now, and leave the issue to the commit message", rel, i+1, m)
			}
		}
	})
	if checked < 500 {
		t.Fatalf("checked %d files below %s: the walk went wrong", checked, root)
	}
	for rel := range issueNumbersLeft {
		if !cites[rel] {
			t.Errorf("issueNumbersLeft lists %s, which cites no issue number: remove it", rel)
		}
	}
}
