package streamlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLockDir: a held directory is refused without waiting, saying which
// file holds it, until its lock is closed; a directory that cannot be
// opened is an error of its own, not ErrDirLocked.
func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	first, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, LockName)); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the lock file: %v", err)
	}
	second, err := LockDir(dir)
	if !errors.Is(err, ErrDirLocked) {
		if second != nil {
			second.Close()
		}
		t.Fatalf("LockDir on a held dir: %v, want ErrDirLocked", err)
	}
	if want := filepath.Join(dir, LockName); !strings.Contains(err.Error(), want) {
		t.Errorf("the refusal %q does not name %s", err, want)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := LockDir(dir)
	if err != nil {
		t.Fatalf("LockDir once the holder closed its lock: %v", err)
	}
	again.Close()

	if _, err := LockDir(filepath.Join(dir, "missing")); err == nil || errors.Is(err, ErrDirLocked) {
		t.Fatalf("LockDir on a missing dir: %v, want an error other than ErrDirLocked", err)
	}
}
