package snapfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveLeftovers: what earlier runs wrote goes, with the names of
// earlier versions; nothing else in dir is touched, and keep spares the
// adopted file and its metadata.
func TestRemoveLeftovers(t *testing.T) {
	leftovers := []string{
		"replproxy-snapshot-0123456789abcdef.tmp",
		"replproxy-snapshot-.tmp",
		"replproxy-3e6f7fa1b2ac2025fc6edcca60effe8ade398925-1000.rdb",
		"replproxy-3e6f7fa1b2ac2025fc6edcca60effe8ade398925-1000.rdb.tmp",
	}
	kept := []string{
		"dump.rdb",
		"replproxy.conf",
		"replproxy-snapshot.rdb.bak",
		"replproxy-notes.tmp",
		"replproxy-3e6f7fa1b2ac2025fc6edcca60effe8ade39892-1000.rdb", // 39 hex
	}
	for _, keep := range []bool{false, true} {
		dir := t.TempDir()
		for _, name := range append(append([]string{FileName, MetaName}, leftovers...), kept...) {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		done, err := RemoveLeftovers(dir, keep)
		if err != nil {
			t.Fatal(err)
		}
		want := len(leftovers) + 2
		if keep {
			want -= 2
		}
		if len(done) != want {
			t.Fatalf("keep %v: removed %v, want %d files", keep, done, want)
		}
		left := dirNames(t, dir)
		for _, name := range kept {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Fatalf("keep %v: %s removed", keep, name)
			}
		}
		if extra := len(left) - len(kept); extra != 2*btoi(keep) {
			t.Fatalf("keep %v: dir holds %q", keep, left)
		}
	}
	if _, err := RemoveLeftovers(filepath.Join(t.TempDir(), "missing"), false); err == nil {
		t.Fatal("a missing dir listed")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
