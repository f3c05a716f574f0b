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
	for _, f := range one {
		seen[f.Kind] = true
		if f.Kind == ProxyStop && f.Hold <= 10*time.Second {
			t.Errorf("%+v: a SIGSTOP that does not outlast repl-timeout", f)
		}
		if f.Kind == WANCut && (f.Hold < 5*time.Second || f.Hold > 30*time.Second) {
			t.Errorf("%+v: a cut outside 5–30 s", f)
		}
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
	if len(ks) != 6 || ks[0] != ProxyKill || ks[len(ks)-1] != ConfigSet {
		t.Fatalf("Kinds() = %v", ks)
	}
	for _, k := range append(ks, NoFault) {
		if k.String() == "unknown" {
			t.Errorf("kind %d has no name", int(k))
		}
	}
}
