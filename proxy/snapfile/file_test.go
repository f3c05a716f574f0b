package snapfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/replproxy/replproxy/replid"
)

// writeFile writes data through a Sink and returns its record.
func writeFile(t testing.TB, dir string, data []byte) *File {
	t.Helper()
	w, err := Create(dir, replid.New(), 7, time.Now(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	file, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return file
}

// moveAside renames path out of the way, keeping its file.
func moveAside(t *testing.T, path string) {
	t.Helper()
	if err := os.Rename(path, path+".aside"); err != nil {
		t.Fatal(err)
	}
}

// TestOpenOnlyIfUnchanged: a File opens only while dir holds the very file
// written; a FIFO (refused without blocking), a symlink to a copy or another
// file of the same size put in its place is refused, and Remove leaves such
// a file alone.
func TestOpenOnlyIfUnchanged(t *testing.T) {
	data := []byte("REDIS0011 snapshot")
	cases := []struct {
		name    string
		replace func(t *testing.T, path string)
		opens   bool
	}{
		{"unchanged", func(t *testing.T, path string) {}, true},
		// The file written is moved aside, not removed, so that what takes
		// its name cannot get its inode number back (os.SameFile compares
		// device and inode).
		{"fifo", func(t *testing.T, path string) {
			moveAside(t, path)
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"symlink to a copy", func(t *testing.T, path string) {
			cp := filepath.Join(t.TempDir(), "copy.rdb")
			if err := os.WriteFile(cp, data, 0o600); err != nil {
				t.Fatal(err)
			}
			moveAside(t, path)
			if err := os.Symlink(cp, path); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"another file of the same size", func(t *testing.T, path string) {
			if err := os.Link(path, path+".aside"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path+".other", data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".other", path); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := writeFile(t, dir, data)
			tc.replace(t, file.Path())
			f, err := file.Open()
			if f != nil {
				f.Close()
			}
			if opened := err == nil; opened != tc.opens {
				t.Fatalf("opened %v (%v), want %v", opened, err, tc.opens)
			}
			if err := file.Remove(); err != nil {
				t.Fatal(err)
			}
			_, err = os.Lstat(file.Path())
			if removed := os.IsNotExist(err); removed != tc.opens {
				t.Fatalf("removed %v, want it removed only while it is the file written", removed)
			}
		})
	}
}
