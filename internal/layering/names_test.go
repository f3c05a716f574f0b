package layering

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTestFileNamed(t *testing.T) {
	sources := []string{"writer", "vecfile_linux", "proc_other"}
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"writer", true},
		{"writer_sendfile", true},
		{"vecfile_linux", true},
		{"helpers", true},
		{"helpers_fakeprimary", true},
		{"bench", true},
		{"fuzz", true},
		{"race", true},
		{"norace", true},
		{"upstream_faults_integration", true},
		{"writers", false},  // a longer word, not writer's test
		{"compress", false}, // no compress.go
		{"proc", false},     // proc_other.go is no proc.go
		{"fakeprimary", false},
		{"integration_faults", false},
		{"faults_integration_extra", false},
	} {
		if got := testFileNamed(tc.name, sources); got != tc.want {
			t.Errorf("testFileNamed(%q, %q) = %v, want %v", tc.name, sources, got, tc.want)
		}
	}
}

// TestTestFileNames: in every library package of the module (all but
// cmd/ and bench/, whose tests drive programs and may be named for what
// they check) each test file follows testFileNamed's rule.
func TestTestFileNames(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if name := d.Name(); dir != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) ||
			rel == "cmd" || rel == "bench" {
			return filepath.SkipDir
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		var sources, tests []string
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") {
				continue
			}
			if base, ok := strings.CutSuffix(name, "_test.go"); ok {
				tests = append(tests, base)
			} else {
				sources = append(sources, strings.TrimSuffix(name, ".go"))
			}
		}
		for _, base := range tests {
			checked++
			if !testFileNamed(base, sources) {
				t.Errorf("%s/%s_test.go is named for none of its package's source files, nor for what it holds (%q), and does not end in %s: name it for the file it tests",
					rel, base, sharedTestNames, integrationSuffix)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d test files found below %s: the walk went wrong", checked, root)
	}
}
