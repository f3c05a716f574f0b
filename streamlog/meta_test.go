package streamlog

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/replproxy/replproxy/replid"
)

// FuzzRecoverMeta: whatever meta.json holds, over a sound
// log of four segments, Open never panics, never reports an offset out of
// [0, replid.MaxOffset] or bounds out of order, and what it keeps reads
// back as exactly the bytes appended at those offsets.
func FuzzRecoverMeta(f *testing.F) {
	tmpl := f.TempDir()
	root, err := os.OpenRoot(tmpl)
	if err != nil {
		f.Fatal(err)
	}
	l, _, err := Open(Options{FS: RootFS{root}, MaxBytes: 1 << 30, SegmentBytes: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	l.Reset(testID, 0)
	data := stream(200<<10, 17)
	for i := 0; i < len(data); i += 3000 {
		l.Append(data[i:min(i+3000, len(data))], true)
	}
	l.Close()
	root.Close()
	good, err := os.ReadFile(filepath.Join(tmpl, metaName))
	if err != nil {
		f.Fatal(err)
	}
	id := `"replid":"` + testID.ReplID + `"`
	f.Add(good)
	f.Add([]byte(`{"version":1,` + id + `,"replid2":"0000000000000000000000000000000000000000","second_offset":-1,"start":0,"segments":[9223372036854770000]}`))
	f.Add([]byte(`{"version":1,` + id + `,"replid2":"0000000000000000000000000000000000000000","second_offset":-1,"start":0,"segments":[65537,1]}`))
	f.Add([]byte(`{"version":1,` + id + `,"replid2":"0000000000000000000000000000000000000000","second_offset":-1,"start":65536,"segments":[65537,131073]}`))
	f.Add([]byte(`{"version":1,` + id + `,"replid2":"` + testID.ReplID + `","second_offset":-1,"start":0,"segments":[1]}`))
	f.Add([]byte(`{"version":1,` + id + `,"replid2":"0000000000000000000000000000000000000000","second_offset":-1,"start":4611686018427387904,"segments":[]}`))
	f.Fuzz(func(t *testing.T, m []byte) {
		dir := t.TempDir()
		copyDir(t, tmpl, dir)
		if err := os.WriteFile(filepath.Join(dir, metaName), m, 0o600); err != nil {
			t.Fatal(err)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		l, _, err := Open(Options{FS: RootFS{root}, MaxBytes: 1 << 30, SegmentBytes: 64 << 10})
		if err != nil {
			return // an error is an answer; a panic is not
		}
		defer l.Close()
		first, last := l.Bounds()
		st := l.Stats()
		id := l.Identity()
		if first < 1 || last < 0 || last > replid.MaxOffset || first > last+1 || st.Synced != last ||
			id.SecondOffset < -1 || id.SecondOffset > replid.MaxOffset {
			t.Fatalf("recovered bounds [%d, %d], synced %d, identity %+v from meta.json %q", first, last, st.Synced, id, m)
		}
		if last < first {
			return
		}
		if last > int64(len(data)) {
			t.Fatalf("recovered [%d, %d] of a log of %d bytes", first, last, len(data))
		}
		if got := readAll(t, l, first); !bytes.Equal(got, data[first-1:last]) {
			t.Fatalf("recovered %d bytes that differ from what was appended at [%d, %d]", len(got), first, last)
		}
	})
}

// syncFailFS fails the fsync of a file whose name starts with prefix.
type syncFailFS struct {
	FS
	prefix string
}

func (f syncFailFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasPrefix(name, f.prefix) {
		return file, err
	}
	return syncFailFile{file}, nil
}

type syncFailFile struct{ File }

func (syncFailFile) Sync() error { return errors.New("injected: input/output error") }

// TestMetaReplacement: meta.json is replaced through a temporary file that
// a failed fsync leaves nothing of, keeping the meta.json before it; a
// replacement a crash left behind, under this version's name or an earlier
// one's, is removed by the next Open.
func TestMetaReplacement(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	first, _ := openDir(t, dir, Options{MaxBytes: 1 << 20})
	if err := first.Reset(testID, 0); err != nil {
		t.Fatal(err)
	}
	first.Close()
	l, _ := openDir(t, dir, Options{FS: syncFailFS{RootFS{root}, metaTempPrefix}, MaxBytes: 1 << 20})
	other := Identity{ReplID: strings.Repeat("b", 40), ReplID2: replid.None, SecondOffset: -1}
	if err := l.Reset(other, 0); err == nil {
		t.Fatal("Reset with meta.json's fsync failing succeeded")
	}
	l.Close()
	names, err := RootFS{root}.Names()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{metaName}) {
		t.Fatalf("after a failed replacement the directory holds %v, want only %s", names, metaName)
	}
	if m, err := os.ReadFile(filepath.Join(dir, metaName)); err != nil || !bytes.Contains(m, []byte(testID.ReplID)) {
		t.Fatalf("meta.json after a failed replacement: %q, %v; want the one before it", m, err)
	}

	for _, name := range []string{metaTemp, metaTempPrefix + "0123456789abcdef" + metaTempSuffix} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	openDir(t, dir, Options{MaxBytes: 1 << 20})
	if names, _ := (RootFS{root}).Names(); !slices.Equal(names, []string{metaName}) {
		t.Fatalf("after Open the directory holds %v, want only %s", names, metaName)
	}
}
