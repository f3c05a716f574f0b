package streamlog

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDirFS: the log's directory is made inside dir when missing and
// reused when there; a link planted under its name that leads out of dir
// is not followed.
func TestDirFS(t *testing.T) {
	dir := t.TempDir()
	for range 2 {
		fsys, err := DirFS(dir, "log")
		if err != nil {
			t.Fatal(err)
		}
		fsys.Root.Close()
	}
	if fi, err := os.Stat(filepath.Join(dir, "log")); err != nil || !fi.IsDir() {
		t.Fatalf("log dir: %v %v", fi, err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "planted")); err != nil {
		t.Fatal(err)
	}
	if fsys, err := DirFS(dir, "planted"); err == nil {
		fsys.Root.Close()
		t.Fatal("a link leading out of dir was taken as the log's directory")
	}
}
