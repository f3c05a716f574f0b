package safefile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestOpenRegularRefuses: a link, a FIFO and a directory under the name
// are refused, the FIFO without blocking; a file swapped for another, or
// grown, since it was written is refused by want.
func TestOpenRegularRefuses(t *testing.T) {
	dir := t.TempDir()
	root := openRoot(t, dir)
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"link", "fifo", "sub"} {
		t.Run(name, func(t *testing.T) {
			f, _, err := OpenRegular(root, name, nil)
			if !errors.Is(err, ErrChanged) {
				if f != nil {
					f.Close()
				}
				t.Fatalf("OpenRegular(%s): %v, want ErrChanged", name, err)
			}
		})
	}

	f, written, err := OpenRegular(root, "target", nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Run("same", func(t *testing.T) {
		f, fi, err := OpenRegular(root, "target", written)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if !os.SameFile(fi, written) {
			t.Fatal("OpenRegular returned another file's FileInfo")
		}
	})
	t.Run("grown", func(t *testing.T) {
		if err := os.WriteFile(target, []byte("data and more"), 0o600); err != nil {
			t.Fatal(err)
		}
		if f, _, err := OpenRegular(root, "target", written); !errors.Is(err, ErrChanged) {
			if f != nil {
				f.Close()
			}
			t.Fatalf("a grown file: %v, want ErrChanged", err)
		}
	})
	t.Run("swapped", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(dir, "other"), []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "other"), target); err != nil {
			t.Fatal(err)
		}
		if f, _, err := OpenRegular(root, "target", written); !errors.Is(err, ErrChanged) {
			if f != nil {
				f.Close()
			}
			t.Fatalf("a swapped file: %v, want ErrChanged", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		if _, _, err := OpenRegular(root, "none", nil); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a missing file: %v, want fs.ErrNotExist", err)
		}
	})
}

// faultFS fails the operation named in failOn, once armed.
type faultFS struct {
	FS
	failOn string // "sync", "write", "rename", "syncdir"
}

var errInjected = errors.New("injected")

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return faultFile{File: file, fs: f}, nil
}

func (f *faultFS) Rename(oldName, newName string) error {
	if f.failOn == "rename" {
		return errInjected
	}
	return f.FS.Rename(oldName, newName)
}

func (f *faultFS) SyncDir() error {
	if f.failOn == "syncdir" {
		return errInjected
	}
	return f.FS.SyncDir()
}

type faultFile struct {
	File
	fs *faultFS
}

func (f faultFile) Write(p []byte) (int, error) {
	if f.fs.failOn == "write" {
		return 0, errInjected
	}
	return f.File.Write(p)
}

func (f faultFile) Sync() error {
	if f.fs.failOn == "sync" {
		return errInjected
	}
	return f.File.Sync()
}

// TestCommit: a committed file is in place with what was written, and its
// FileInfo is the file's; a failed write, fsync or rename leaves nothing,
// and the old file under the name untouched.
func TestCommit(t *testing.T) {
	for _, failOn := range []string{"", "write", "sync", "rename"} {
		t.Run("fail="+failOn, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "name"), []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			fsys := &faultFS{FS: RootFS{openRoot(t, dir)}}
			p, err := Create(fsys, "name-", ".tmp", nil)
			if err != nil {
				t.Fatal(err)
			}
			fsys.failOn = failOn
			_, err = p.Write([]byte("new"))
			var fi os.FileInfo
			if err == nil {
				fi, err = p.Commit("name")
			} else {
				p.Cancel()
			}
			got, rerr := os.ReadFile(filepath.Join(dir, "name"))
			if rerr != nil {
				t.Fatal(rerr)
			}
			if failOn == "" {
				if err != nil || string(got) != "new" {
					t.Fatalf("commit: %v, name holds %q", err, got)
				}
				onDisk, err := os.Lstat(filepath.Join(dir, "name"))
				if err != nil || !os.SameFile(fi, onDisk) || fi.Size() != 3 {
					t.Fatalf("commit's FileInfo is not the file in place: %v", err)
				}
			} else if !errors.Is(err, errInjected) || string(got) != "old" {
				t.Fatalf("failing %s: %v, name holds %q; want the injected error and the old file", failOn, err, got)
			}
			if n := names(t, dir); !slices.Equal(n, []string{"name"}) {
				t.Fatalf("left in the directory: %v", n)
			}
		})
	}
	t.Run("fail=syncdir", func(t *testing.T) {
		dir := t.TempDir()
		fsys := &faultFS{FS: RootFS{openRoot(t, dir)}, failOn: "syncdir"}
		err := WriteFile(fsys, "name", "name-", ".tmp", []byte("new"), nil)
		if !errors.Is(err, errInjected) {
			t.Fatalf("failing the directory sync: %v, want the injected error", err)
		}
		// The rename happened: the file is in place, no temporary beside it.
		if n := names(t, dir); !slices.Equal(n, []string{"name"}) {
			t.Fatalf("left in the directory: %v", n)
		}
	})
}

// TestCreateSkipsTakenNames: a name that exists, a planted link included,
// is never opened; another is drawn, and the link's target is untouched.
func TestCreateSkipsTakenNames(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The first name drawn is name-0000000000000000.tmp (eight zero bytes).
	if err := os.Symlink(target, filepath.Join(dir, "name-0000000000000000.tmp")); err != nil {
		t.Fatal(err)
	}
	random := bytes.NewReader(append(make([]byte, 8), bytes.Repeat([]byte{1}, 8)...))
	fsys := RootFS{openRoot(t, dir)}
	p, err := Create(fsys, "name-", ".tmp", random)
	if err != nil {
		t.Fatal(err)
	}
	if p.TempName() != "name-0101010101010101.tmp" {
		t.Fatalf("temporary name %s, want the second one drawn", p.TempName())
	}
	if _, err := p.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	// The rename replaces a link planted under the final name too, without
	// following it.
	if err := os.Symlink(target, filepath.Join(dir, "name")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Commit("name"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(target); string(got) != "keep" {
		t.Fatalf("the link's target holds %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "name")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("name is not the regular file committed: %v", err)
	}
	if _, err := Create(fsys, "name-", ".tmp", bytes.NewReader(nil)); err == nil || !strings.Contains(err.Error(), "temporary file name") {
		t.Fatalf("Create with no randomness: %v", err)
	}
}

// TestCancel: a cancelled file leaves nothing; Commit after it fails.
func TestCancel(t *testing.T) {
	dir := t.TempDir()
	p, err := Create(RootFS{openRoot(t, dir)}, "name-", ".tmp", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Cancel(); err != nil {
		t.Fatal(err)
	}
	if err := p.Cancel(); err != nil {
		t.Fatalf("second Cancel: %v", err)
	}
	if _, err := p.Commit("name"); err == nil {
		t.Fatal("Commit after Cancel succeeded")
	}
	if n := names(t, dir); len(n) != 0 {
		t.Fatalf("left in the directory: %v", n)
	}
}
