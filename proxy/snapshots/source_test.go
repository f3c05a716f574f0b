package snapshots

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replid"
)

const testSource = "127.0.0.1:7000"

// TestFetchFromSource: a fetch asks the snapshot source; a source whose
// position the history cannot continue (another replid) is counted under
// its reason, and then under snapshot-from-fallback yes the primary is
// asked at once, counted as a fallback, while under no the source is asked
// again (with backoff) until it serves.
func TestFetchFromSource(t *testing.T) {
	other := replid.New()
	cases := []struct {
		name      string
		fallback  bool
		badFirst  int      // attempts at which the source stands in another history
		froms     []string // the source of each attempt
		fallbacks int64
		failures  int64 // the source's, under replid
	}{
		{name: "served", froms: []string{testSource}},
		{name: "fallback yes", fallback: true, badFirst: 1, froms: []string{testSource, ""}, fallbacks: 1, failures: 1},
		{name: "fallback no", badFirst: 2, froms: []string{testSource, testSource, testSource}, failures: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			src := &fakeSource{connected: true}
			k := newTestKeeper(t, src)
			k.Configure(Settings{Primary: testPrimary, Source: testSource, Fallback: tc.fallback, Dir: t.TempDir()})
			src.position = func(from string) (string, int64) {
				if from != "" && len(src.froms) <= tc.badFirst {
					return other, 0
				}
				return src.hist.Identity().ReplID, 0
			}
			src.attempt = func(_ int, start func() error) error { return start() }
			plan, err := k.PlanFull()
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- k.Run(ctx) }()
			select {
			case <-plan.Fetch.Ready():
			case <-time.After(10 * time.Second):
				t.Fatal("the fetch never ended")
			}
			waitFor(t, func() bool { return k.Counts().Fetches == 1 })
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if plan.Fetch.Err() != nil {
				t.Fatalf("the fetch failed: %v", plan.Fetch.Err())
			}
			if !slices.Equal(src.froms, tc.froms) {
				t.Errorf("attempts from %q, want %q", src.froms, tc.froms)
			}
			sc := k.SourceCounts()
			wantFetches := int64(0)
			if tc.froms[len(tc.froms)-1] != "" {
				wantFetches = 1
			}
			if sc.Fetches != wantFetches || sc.Fallbacks != tc.fallbacks || sc.Failures[0] != tc.failures {
				t.Errorf("source counts %+v, want %d fetches, %d fallbacks, %d failures under replid",
					sc, wantFetches, tc.fallbacks, tc.failures)
			}
		})
	}
}

// TestSourceReason: how a failure of the source is counted.
func TestSourceReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&replid.NotContinued{Reason: SourceBehind}, SourceBehind},
		{&replid.NotContinued{Reason: SourceReplID}, SourceReplID},
		{&replid.NotContinued{Reason: "unheard-of"}, SourceDown},
		{refusal, SourceRefused},
		{errors.New("connect: connection refused"), SourceDown},
		{context.DeadlineExceeded, SourceDown},
	} {
		if got := SourceReasons[sourceReason(tc.err)]; got != tc.want {
			t.Errorf("sourceReason(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// refusal is an error reply, as the upstream link reports one.
var refusal = &wire.RefusedError{Command: "PSYNC", Reply: "-NOMASTERLINK Can't SYNC while not connected with my master"}

// TestSeed: a seed hands out the source's position, and once begun the
// history starts at it, the Host is told of the new generation, and the
// fetch in flight that replicas join ends with the payload; an aborted seed
// leaves the history as it was and says whether to fall back.
func TestSeed(t *testing.T) {
	t.Run("begun", func(t *testing.T) {
		src := &fakeSource{connected: true}
		k := newTestKeeper(t, src)
		k.Configure(Settings{Primary: testPrimary, Source: testSource, Dir: t.TempDir()})
		id := replid.New()
		src.position = func(string) (string, int64) { return id, 1000 }
		src.attempt = func(_ int, start func() error) error { return start() }
		changed := make(chan history.Change, 1)
		k.host = fakeHost{changed: changed}
		epoch := src.hist.Epoch()
		go k.Run(t.Context())
		defer k.Close()
		sd, _, err := k.Seed(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if r, off := sd.Position(); r != id || off != 1000 {
			t.Fatalf("position %s %d, want %s 1000", r, off, id)
		}
		sd.Begin()
		if got := src.hist.Identity(); got.ReplID != id || !got.History || src.hist.Stream().Offset() != 1000 {
			t.Errorf("history %+v at %d after Begin, want %s at 1000", got, src.hist.Stream().Offset(), id)
		}
		select {
		case c := <-changed:
			if want := (history.Change{Epoch: epoch + 1, Kind: history.NewGeneration}); c != want {
				t.Errorf("Host told of %+v, want %+v", c, want)
			}
		default:
			t.Error("Begin returned without telling the Host of the new generation")
		}
		waitFor(t, func() bool { return k.SourceCounts().Fetches == 1 })
		if sn := src.hist.Newest(); sn == nil || sn.Offset() != 1000 {
			t.Errorf("newest snapshot %v, want the seed's at 1000", sn)
		}
		if c := k.Counts(); c.ByReason[history.FetchProxySync] != 1 {
			t.Errorf("counts %+v, want one proxy_sync fetch", c)
		}
	})
	t.Run("aborted", func(t *testing.T) {
		src := &fakeSource{connected: true}
		k := newTestKeeper(t, src)
		k.Configure(Settings{Primary: testPrimary, Source: testSource, Fallback: true, Dir: t.TempDir()})
		before := src.hist.Identity()
		src.attempt = func(_ int, start func() error) error { return start() }
		go k.Run(t.Context())
		defer k.Close()
		sd, _, err := k.Seed(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !sd.Abort(&replid.NotContinued{Reason: SourceBehind, Detail: "behind"}) {
			t.Error("Abort under fallback yes did not fall back")
		}
		if got := src.hist.Identity(); got != before {
			t.Errorf("history %+v after Abort, want %+v", got, before)
		}
		if sc := k.SourceCounts(); sc.Failures[reasonIndex(SourceBehind)] != 1 || sc.Fallbacks != 1 {
			t.Errorf("source counts %+v, want one behind and one fallback", sc)
		}
	})
	t.Run("checked before asked", func(t *testing.T) {
		src := &fakeSource{connected: true}
		k := newTestKeeper(t, src)
		k.Configure(Settings{Primary: testPrimary, Source: testSource, Dir: t.TempDir()})
		src.attempt = func(_ int, start func() error) error { return start() }
		go k.Run(t.Context())
		defer k.Close()
		refuse := errors.New("not in the primary's backlog")
		_, fallback, err := k.Seed(t.Context(), func(string, int64) error { return refuse })
		if !errors.Is(err, refuse) || fallback {
			t.Errorf("Seed: %v, fallback %v; want the check's refusal and no fallback", err, fallback)
		}
		if sc := k.SourceCounts(); sc.Failures[reasonIndex(SourceDown)] != 1 {
			t.Errorf("source counts %+v, want one down (an unclassified refusal)", sc)
		}
	})
}

// TestSeedClosed: a seed asked for before Run, and undone by Close before it
// ran, returns at once with ErrClosed, counted as no failure of the source.
func TestSeedClosed(t *testing.T) {
	src := &fakeSource{connected: true}
	k := newTestKeeper(t, src)
	k.Configure(Settings{Primary: testPrimary, Source: testSource, Dir: t.TempDir()})
	done := make(chan error, 1)
	go func() {
		_, _, err := k.Seed(t.Context(), nil)
		done <- err
	}()
	waitFor(t, func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		return len(k.queued) == 1
	})
	k.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Seed: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Seed still waits after Close")
	}
	if sc := k.SourceCounts(); sc != (SourceCounts{}) {
		t.Errorf("source counts %+v after a close, want none", sc)
	}
}

// reasonIndex is reason's place in SourceCounts.Failures.
func reasonIndex(reason string) int { return slices.Index(SourceReasons[:], reason) }
