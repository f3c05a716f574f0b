package snapfile

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// dirNames lists dir's entries, sorted.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// completeSnapshot returns a complete snapshot holding data.
func completeSnapshot(t testing.TB, replID string, offset int64, data []byte) *replbuf.Snapshot {
	t.Helper()
	sn := replbuf.NewSnapshot(replID, offset, replbuf.NewPool(0), time.Now())
	if err := sn.Append(data); err != nil {
		t.Fatal(err)
	}
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sn.Release)
	return sn
}

// TestSinkCloseAndLoad: a file written through a Sink from a snapshot's
// cursor lands under FileName in one rename, with metadata
// that Load accepts and that names it by size and CRC64; nothing temporary
// is left.
func TestSinkCloseAndLoad(t *testing.T) {
	dir := t.TempDir()
	id := replid.New()
	data, err := os.ReadFile("../../testdata/rdb/small.rdb")
	if err != nil {
		t.Fatal(err)
	}
	sn := completeSnapshot(t, id, 1234, data)
	rd, err := sn.NewReader()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	w, err := Create(dir, id, 1234, sn.Created(), Options{WithMeta: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.CopyFrom(context.Background(), rd); err != nil {
		t.Fatal(err)
	}
	file, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := data
	if got := dirNames(t, dir); !slices.Equal(got, []string{MetaName, FileName}) {
		t.Fatalf("dir holds %q, want the file and its metadata only", got)
	}
	if b, _ := os.ReadFile(file.Path()); !bytes.Equal(b, want) {
		t.Fatal("the file does not hold what was written")
	}
	if file.ReplID != id || file.Offset != 1234 || file.Size != int64(len(want)) || !file.Created.Equal(sn.Created()) {
		t.Fatalf("record %+v", file)
	}
	loaded, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(loaded.Info, file.Info) || loaded.ReplID != id || loaded.Offset != 1234 || loaded.Size != file.Size {
		t.Fatalf("loaded %+v, wrote %+v", loaded, file)
	}
	f, err := loaded.Open()
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestSinkCancel: a cancelled file leaves nothing in dir, and a Sink without
// metadata writes none.
func TestSinkCancel(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, replid.New(), 1, time.Now(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	w.Cancel()
	if got := dirNames(t, dir); len(got) != 0 {
		t.Fatalf("dir holds %q after Cancel", got)
	}
	w, err = Create(dir, replid.New(), 1, time.Now(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("whole")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{FileName}) {
		t.Fatalf("dir holds %q, want the file alone", got)
	}
}

// TestSinkSkipsPlantedNames: a temporary name that exists (a planted link)
// is never opened, and a link planted at FileName is replaced, not
// followed: the targets stay untouched.
func TestSinkSkipsPlantedNames(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "dir")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	const victim = "precious data\n"
	var targets []string
	for i, name := range []string{FileName, "replproxy-snapshot-0101010101010101.tmp"} {
		target := filepath.Join(base, "target"+string(rune('0'+i)))
		if err := os.WriteFile(target, []byte(victim), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, target)
	}
	random := bytes.NewReader(slices.Concat(bytes.Repeat([]byte{1}, 8), bytes.Repeat([]byte{2}, 8)))
	w, err := Create(dir, replid.New(), 1, time.Now(), Options{Random: random})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("snapshot")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, target := range targets {
		if b, err := os.ReadFile(target); err != nil || string(b) != victim {
			t.Fatalf("target %s: %q %v; a link was followed", target, b, err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(dir, FileName)); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("%s: %v %v, want the regular file in place of the link", FileName, fi, err)
	}
}

// TestLoadWalksTheFile: a file whose metadata is sound and whose CRC64
// matches it is still refused at start when it is not an RDB a replica
// loads (the RDB walk), whether it was written whole by Write or ends
// with bytes after the RDB's end; a good one written by Write loads.
func TestLoadWalksTheFile(t *testing.T) {
	good := redistest.RDBWith([]byte("value"))
	for _, tc := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"an RDB", good, true},
		{"junk under a zero checksum", redistest.JunkRDB(), false},
		{"bytes after the RDB's end", append(slices.Clone(good), "tail"...), false},
		{"an RDB cut short", good[:len(good)-3], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := Create(dir, replid.New(), 5, time.Now(), Options{WithMeta: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(tc.data); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Close(); err != nil {
				t.Fatal(err)
			}
			_, err = Load(dir)
			if tc.ok != (err == nil) {
				t.Fatalf("Load: %v, want it to succeed: %v", err, tc.ok)
			}
		})
	}
}
