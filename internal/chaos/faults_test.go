package chaos

import (
	"reflect"
	"testing"
	"time"
)

// TestNemesisSeeded: the same seed gives the same faults (a run is
// reproduced from its seed), another seed others, and every kind comes up.
func TestNemesisSeeded(t *testing.T) {
	proxies, replicas := []string{"proxy-a", "proxy-b"}, []string{"a1", "b1"}
	faults := func(seed uint64) []Fault {
		n := NewNemesis(seed, 10*time.Second, proxies, replicas)
		var fs []Fault
		for range 200 {
			fs = append(fs, n.Next())
		}
		return fs
	}
	one, again, other := faults(36), faults(36), faults(37)
	if !reflect.DeepEqual(one, again) {
		t.Fatal("seed 36 gave two sequences")
	}
	if reflect.DeepEqual(one, other) {
		t.Fatal("seeds 36 and 37 gave the same sequence")
	}
	seen := map[Kind]bool{}
	var longCuts int
	for _, f := range one {
		seen[f.Kind] = true
		if f.Kind == WANCut && f.Hold > 30*time.Second {
			longCuts++
		}
		if f.Kind == ProxyStop && f.Hold <= 10*time.Second {
			t.Errorf("%+v: a SIGSTOP that does not outlast repl-timeout", f)
		}
		if f.Kind == WANCut && (f.Hold < 5*time.Second || f.Hold > 120*time.Second) {
			t.Errorf("%+v: a cut outside 5–120 s", f)
		}
	}
	if longCuts == 0 {
		t.Error("no WAN cut over 30 s in 200 faults")
	}
	for _, k := range Kinds() {
		if !seen[k] {
			t.Errorf("kind %s never chosen in 200 faults", k)
		}
	}
}

// TestKinds: the report's rows are the fault kinds, each named, and no
// other.
func TestKinds(t *testing.T) {
	ks := Kinds()
	if len(ks) != 11 || ks[0] != ProxyKill || ks[len(ks)-1] != LinkCut {
		t.Fatalf("Kinds() = %v", ks)
	}
	for _, k := range append(ks, NoFault) {
		if k.String() == "unknown" {
			t.Errorf("kind %d has no name", int(k))
		}
	}
}

func TestParseKinds(t *testing.T) {
	ks, err := ParseKinds("proxy-wipe, disk-full")
	if err != nil || !reflect.DeepEqual(ks, []Kind{ProxyWipe, DiskFull}) {
		t.Fatalf("ParseKinds = %v, %v", ks, err)
	}
	if _, err := ParseKinds("proxy-wipe,fire"); err == nil {
		t.Fatal("an unknown kind parsed")
	}
}

// TestNemesisOverlaps: about one fault in two carries a second, always a
// compatible one, and what the pair may cost is the sum.
func TestNemesisOverlaps(t *testing.T) {
	n := NewNemesis(36, 10*time.Second, []string{"proxy-a", "proxy-b"}, []string{"a1", "b1", "redis-2"})
	var pairs int
	for range 600 {
		f := n.Next()
		if f.Inner == nil {
			continue
		}
		pairs++
		if !Compatible(f, *f.Inner) {
			t.Errorf("incompatible pair %s", f.Name())
		}
		if f.Kind == DiskFull && detachesProxyB(*f.Inner) || f.Inner.Kind == DiskFull && detachesProxyB(f) {
			continue // costs more than its parts (TestTotalDiskFullPartingProxyB)
		}
		want := Expected(f.Kind, f.Target)
		in := Expected(f.Inner.Kind, f.Inner.Target)
		if got := f.Total(); got.Primary != want.Primary+in.Primary || got.Proxies != want.Proxies+in.Proxies {
			t.Errorf("%s: Total %+v, want %+v + %+v", f.Name(), got, want, in)
		}
	}
	if pairs < 250 || pairs > 350 {
		t.Errorf("%d pairs in 600 faults, want about 300", pairs)
	}
}

func TestCompatible(t *testing.T) {
	for _, c := range []struct {
		outer, inner Fault
		want         bool
	}{
		{Fault{Kind: ProxyKill, Target: "proxy-a"}, Fault{Kind: WANCut}, true},
		{Fault{Kind: PrimaryKill}, Fault{Kind: ConnStorm, Target: "proxy-b"}, true},
		{Fault{Kind: ProxyWipe, Target: "proxy-b"}, Fault{Kind: DiskFull, Target: "proxy-a"}, true},
		{Fault{Kind: ProxyKill, Target: "proxy-a"}, Fault{Kind: LinkCut, Target: "proxy-a"}, false},    // its target is down
		{Fault{Kind: ProxyStop, Target: "proxy-b"}, Fault{Kind: CertRotate, Target: "proxy-b"}, false}, // nor configured
		{Fault{Kind: WANCut}, Fault{Kind: WANCut}, false},                                              // one of a kind
		{Fault{Kind: WANCut}, Fault{Kind: PrimaryKill}, false},                                         // a failover is only outer
		{Fault{Kind: WANCut}, Fault{Kind: ProxyWipe, Target: "proxy-b"}, false},                        // so is a wipe
		{Fault{Kind: PrimaryKill}, Fault{Kind: ReplicaKill, Target: "a1"}, false},                      // the replicas change
		{Fault{Kind: ConnStorm, Target: "proxy-a"}, Fault{Kind: ConfigSet, Target: "proxy-a"}, false},  // maxclients under a storm
		{Fault{Kind: ConnStorm, Target: "proxy-a"}, Fault{Kind: ConfigSet, Target: "proxy-b"}, true},
	} {
		if got := Compatible(c.outer, c.inner); got != c.want {
			t.Errorf("Compatible(%s, %s) = %v, want %v", c.outer.Name(), c.inner.Name(), got, c.want)
		}
	}
}

// TestTotalDiskFullPartingProxyB: proxy A's disk full while proxy B is
// parted from proxy A (a WAN cut, proxy B killed or stopped) may cost proxy
// B's and its replicas' full syncs and one fork, since the stream log
// cannot cover the outage; the same faults without the full disk, or a
// full disk with proxy A's side faulted, cost only their sum.
func TestTotalDiskFullPartingProxyB(t *testing.T) {
	full := Fault{Kind: DiskFull, Target: "proxy-a"}
	for _, other := range []Fault{
		{Kind: WANCut},
		{Kind: ProxyKill, Target: "proxy-b"},
		{Kind: ProxyStop, Target: "proxy-b"},
	} {
		outer, inner := other, full
		for range 2 {
			f := outer
			f.Inner = &inner
			if got := f.Total(); got != (Cost{Primary: 1, Proxies: 4}) {
				t.Errorf("%s: Total %+v, want 1 fork and 4 full syncs behind the proxies", f.Name(), got)
			}
			outer, inner = inner, outer
		}
	}
	for _, f := range []Fault{
		{Kind: WANCut, Inner: &Fault{Kind: ConnStorm, Target: "proxy-a"}},
		{Kind: ProxyStop, Target: "proxy-b", Inner: &Fault{Kind: LinkCut, Target: "proxy-a"}},
		{Kind: DiskFull, Target: "proxy-a", Inner: &Fault{Kind: ConnStorm, Target: "proxy-b"}},
		{Kind: DiskFull, Target: "proxy-a", Inner: &Fault{Kind: ProxyStop, Target: "proxy-a"}},
	} {
		if got := f.Total(); got != (Cost{}) {
			t.Errorf("%s: Total %+v, want nothing", f.Name(), got)
		}
	}
	wipe := Fault{Kind: ProxyWipe, Target: "proxy-b", Inner: &full}
	if got := wipe.Total(); got != Expected(ProxyWipe, "proxy-b") {
		t.Errorf("%s: Total %+v, want a wipe's own cost", wipe.Name(), got)
	}
}
