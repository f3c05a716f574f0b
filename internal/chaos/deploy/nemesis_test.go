package deploy

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// TestUntilLoadedAsksAgainWhileLoading: a command answered -LOADING is
// sent again until it takes; any other answer ends it at once; -LOADING
// still at the bound is returned.
func TestUntilLoadedAsksAgainWhileLoading(t *testing.T) {
	loading := &redistest.ReplyError{Msg: "LOADING Redis is loading the dataset in memory"}
	answers := func(errs ...error) (func() error, *int) {
		calls := new(int)
		return func() error {
			err := errs[min(*calls, len(errs)-1)]
			*calls++
			return err
		}, calls
	}

	send, calls := answers(loading, loading, nil)
	if err := untilLoaded(5*time.Second, send); err != nil || *calls != 3 {
		t.Errorf("loading twice, then taken: %v after %d calls; want nil after 3", err, *calls)
	}
	refused := &redistest.ReplyError{Msg: "ERR wrong number of arguments"}
	send, calls = answers(refused, nil)
	if err := untilLoaded(5*time.Second, send); !errors.Is(err, refused) || *calls != 1 {
		t.Errorf("refused: %v after %d calls; want the refusal after 1", err, *calls)
	}
	down := errors.New("connection refused")
	send, calls = answers(down, nil)
	if err := untilLoaded(5*time.Second, send); !errors.Is(err, down) || *calls != 1 {
		t.Errorf("unreachable: %v after %d calls; want the error after 1", err, *calls)
	}
	send, _ = answers(loading)
	if err := untilLoaded(30*time.Millisecond, send); !errors.Is(err, loading) {
		t.Errorf("loading past the bound: %v; want -LOADING", err)
	}
}

// TestNestedHolds: the outer fault holds alone for half its hold, at most
// 2 s, before the inner one starts, and at least 1 s after the inner
// one's heal, so that the inner fault is always healed first.
func TestNestedHolds(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		outer, inner, lead, rest time.Duration
	}{
		{10 * s, 3 * s, 2 * s, 5 * s},
		{3 * s, 1 * s, 1500 * time.Millisecond, 1 * s},
		{4 * s, 30 * s, 2 * s, 1 * s}, // an inner fault longer than the outer
	} {
		lead, rest := nestedHolds(tc.outer, tc.inner)
		if lead != tc.lead || rest != tc.rest {
			t.Errorf("nestedHolds(%v, %v) = %v, %v; want %v, %v", tc.outer, tc.inner, lead, rest, tc.lead, tc.rest)
		}
	}
}

// TestWipeMoves: what a wiped proxy serves goes elsewhere meanwhile: proxy
// A's replicas and proxy B to the standby, proxy B's replicas to proxy A.
func TestWipeMoves(t *testing.T) {
	if moved, stand := wipeMoves("proxy-a"); !slices.Equal(moved, []string{"a1", "a2", "a3", "proxy-b"}) || stand != "standby" {
		t.Errorf("wipe of proxy A moves %q to %s", moved, stand)
	}
	if moved, stand := wipeMoves("proxy-b"); !slices.Equal(moved, []string{"b1", "b2", "b3"}) || stand != "proxy-a" {
		t.Errorf("wipe of proxy B moves %q to %s", moved, stand)
	}
}

// TestUpstreamOf: a restarted replica rejoins its home; redis-1 and
// redis-2, which forget their REPLICAOF, rejoin the primary of now.
func TestUpstreamOf(t *testing.T) {
	d := testDeployment(t)
	for name, want := range map[string]string{"a2": "proxy-a", "b3": "proxy-b", "redis-1": "redis-2", "redis-2": "redis-2"} {
		if got := d.upstreamOf(name, "redis-2"); got != want {
			t.Errorf("upstreamOf(%s) with redis-2 the primary = %s, want %s", name, got, want)
		}
	}
}

// TestAddrFor: a redis-server is moved to a node's plain port, proxy B to
// a proxy's TLS port.
func TestAddrFor(t *testing.T) {
	d := testDeployment(t)
	standby, _ := d.lookup("standby")
	if got := d.addrFor("a1", "standby"); got != standby.addr {
		t.Errorf("addrFor(a1, standby) = %s, want its plain port %s", got, standby.addr)
	}
	if got, want := d.addrFor("proxy-b", "standby"), d.proxies["standby"].tlsAddr; got != want || got == standby.addr {
		t.Errorf("addrFor(proxy-b, standby) = %s, want its TLS port %s", got, want)
	}
}

// TestSerialOf: each certificate a rotation issues has a serial of its
// own, read as decimal text; a file with no certificate is an error.
func TestSerialOf(t *testing.T) {
	pki := redistest.NewPKI(t)
	first, _ := pki.Issue(t, "proxy-a-1")
	second, key := pki.Issue(t, "proxy-a-2")
	a, err := serialOf(first)
	if err != nil {
		t.Fatal(err)
	}
	b, err := serialOf(second)
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Errorf("two certificates with serial %s", a)
	}
	if _, err := strconv.ParseUint(a, 10, 64); err != nil {
		t.Errorf("serial %q is no decimal number: %v", a, err)
	}
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{notPEM, key, filepath.Join(t.TempDir(), "missing.crt")} {
		if s, err := serialOf(path); err == nil {
			t.Errorf("serialOf(%s) = %s, nil; want an error", filepath.Base(path), s)
		}
	}
}

// TestEmptyDir: a wiped proxy's dir is emptied, files and folders, and
// stays.
func TestEmptyDir(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"stream.log", filepath.Join("snapshots", "1.rdb")} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := emptyDir(dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("after emptyDir: %v, %v; want an empty dir", entries, err)
	}
	if err := emptyDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("emptyDir of a missing dir: no error")
	}
}
