package snapfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/replproxy/replproxy/replid"
)

// ErrDirUnreadable is a dir that cannot be opened at all (missing, say):
// RemoveLeftovers then has nothing to do.
var ErrDirUnreadable = errors.New("dir not readable")

// A Removal is one leftover RemoveLeftovers removed (Err nil) or could not.
type Removal struct {
	Path string
	Err  error
}

// RemoveLeftovers removes, at start, the snapshot files earlier runs left in
// dir: a file a restart cannot serve (keep false: nothing was adopted), a
// temporary file (a write that never finished), and the names of earlier
// versions (replproxy-<replid>-<offset>.rdb, and .rdb.tmp). With keep, FileName
// and MetaName stay (the caller adopted them). Nothing else is touched. It
// returns what it removed or failed to; err is a dir that cannot be listed
// (ErrDirUnreadable when it cannot even be opened).
func RemoveLeftovers(dir string, keep bool) ([]Removal, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDirUnreadable, err)
	}
	defer root.Close()
	d, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	var done []Removal
	for _, name := range names {
		if !IsLeftover(name) || keep && (name == FileName || name == MetaName) {
			continue
		}
		if fi, err := root.Lstat(name); err != nil || fi.IsDir() {
			continue
		}
		err := root.Remove(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		done = append(done, Removal{Path: filepath.Join(dir, name), Err: err})
	}
	return done, nil
}

// IsLeftover reports whether name is one this package writes, or earlier
// versions wrote.
func IsLeftover(name string) bool {
	if name == FileName || name == MetaName {
		return true
	}
	if strings.HasPrefix(name, tempPrefix) && strings.HasSuffix(name, tempSuffix) {
		return true
	}
	// Earlier versions: replproxy-<40 hex>-<offset>.rdb, and .rdb.tmp.
	rest, ok := strings.CutPrefix(name, "replproxy-")
	if !ok {
		return false
	}
	if r, ok := strings.CutSuffix(rest, ".tmp"); ok {
		rest = r
	}
	rest, ok = strings.CutSuffix(rest, ".rdb")
	if !ok || len(rest) < replid.Size+2 || rest[replid.Size] != '-' {
		return false
	}
	return strings.Trim(rest[:replid.Size], "0123456789abcdef") == "" &&
		strings.Trim(rest[replid.Size+1:], "0123456789") == ""
}

// FreeSpace is what an unprivileged writer may still write to dir's file
// system.
func FreeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
