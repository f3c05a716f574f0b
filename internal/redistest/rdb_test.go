package redistest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/replproxy/replproxy/rdbcheck"
)

// TestRDBHelpers: what RDBWith and RDBOfSize make is an RDB the proxy's
// check accepts, of the size asked; JunkRDB is one it refuses.
func TestRDBHelpers(t *testing.T) {
	for _, n := range []int{24, 25, 100, 16 << 10, 1 << 20} {
		rdb := RDBOfSize(n, 7)
		if len(rdb) != n {
			t.Errorf("RDBOfSize(%d) made %d bytes", n, len(rdb))
		}
		if err := rdbcheck.Check(bytes.NewReader(rdb)); err != nil {
			t.Errorf("RDBOfSize(%d): %v", n, err)
		}
	}
	var corrupt *rdbcheck.CorruptError
	if err := rdbcheck.Check(bytes.NewReader(JunkRDB())); !errors.As(err, &corrupt) {
		t.Errorf("JunkRDB passed the check: %v", err)
	}
}
