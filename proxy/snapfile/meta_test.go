package snapfile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/rdbcheck"
	"github.com/replproxy/replproxy/replid"
)

// FuzzMeta: whatever the snapshot's metadata file holds, loading it
// never panics, and a snapshot is adopted only when the metadata is valid
// and names the file on disk by its exact size and CRC64.
func FuzzMeta(f *testing.F) {
	rdb := redistest.RDBWith([]byte("a snapshot's bytes"))
	crc := rdbcheck.CRC64(0, rdb)
	good, _ := json.Marshal(Meta{ReplID: replid.New(), Offset: 100, Size: int64(len(rdb)), CRC64: crc, Created: 1})
	write := func(tb testing.TB, dir string, meta []byte) {
		for name, b := range map[string][]byte{FileName: rdb, MetaName: meta} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				tb.Fatal(err)
			}
		}
	}
	dir := f.TempDir()
	write(f, dir, good)
	if _, err := Load(dir); err != nil {
		f.Fatalf("valid metadata refused: %v", err)
	}
	f.Add(good)
	f.Add([]byte(`{"replid":"` + replid.New() + `","offset":-1,"size":1,"crc64":0}`))
	f.Add([]byte(`{"size":9223372036854775807}`))
	f.Add([]byte(`[1,2,3]`))
	// Out of range: past replid.MaxOffset, a size past
	// it, a creation time before 1970.
	f.Add([]byte(`{"replid":"` + replid.New() + `","offset":4611686018427387905,"size":1,"crc64":0}`))
	f.Add([]byte(`{"replid":"` + replid.New() + `","offset":9223372036854775807,"size":1,"crc64":0}`))
	f.Add([]byte(`{"replid":"` + replid.New() + `","offset":100,"size":9223372036854775807,"crc64":0}`))
	f.Add([]byte(`{"replid":"` + replid.New() + `","offset":100,"size":28,"crc64":0,"created":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		write(t, dir, data)
		sp, err := Load(dir)
		if err != nil {
			return
		}
		var m Meta
		if json.Unmarshal(data, &m) != nil || !replid.Valid(sp.ReplID) || sp.Size != int64(len(rdb)) || m.CRC64 != crc ||
			sp.Offset < 0 || sp.Offset > replid.MaxOffset || sp.Created.Before(time.Unix(0, 0)) {
			t.Fatalf("adopted %+v from metadata %q", sp, data)
		}
	})
}
