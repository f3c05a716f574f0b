package deploy

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/chaos"
)

func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := Flags(fs)
	return o, fs.Parse(args)
}

// TestFlagsDefaults: with no flag, the run is the 90-second one with seed
// 2024 that `make test` runs, every kind, and the report in the log only.
func TestFlagsDefaults(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Duration: 90 * time.Second, Seed: 2024}
	if !reflect.DeepEqual(*o, want) || !reflect.DeepEqual(DefaultOptions(), want) {
		t.Errorf("defaults %+v and DefaultOptions %+v, want %+v", *o, DefaultOptions(), want)
	}
}

// TestFlags: each flag sets its option, as `make chaos` passes them.
func TestFlags(t *testing.T) {
	o, err := parse(t, "-chaos.duration=10m", "-chaos.seed=256353846", "-chaos.kinds=wan-cut, proxy-kill", "-chaos.report=CHAOS.md")
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Duration: 10 * time.Minute, Seed: 256353846, Kinds: []chaos.Kind{chaos.WANCut, chaos.ProxyKill}, Report: "CHAOS.md"}
	if !reflect.DeepEqual(*o, want) {
		t.Errorf("parsed %+v, want %+v", *o, want)
	}
	// An empty list is every kind, as no flag is.
	if o, err := parse(t, "-chaos.kinds=disk-full", "-chaos.kinds="); err != nil || o.Kinds != nil {
		t.Errorf("-chaos.kinds= gave %v, %v; want every kind", o.Kinds, err)
	}
}

// TestFlagsRefuse: a kind of no name, a duration or a seed that does not
// parse is an error naming the flag, not a run of something else.
func TestFlagsRefuse(t *testing.T) {
	for _, args := range [][]string{
		{"-chaos.kinds=wan-cut,proxy-restart"},
		{"-chaos.duration=10"},
		{"-chaos.seed=-1"},
	} {
		_, err := parse(t, args...)
		name, _, _ := strings.Cut(strings.TrimPrefix(args[0], "-"), "=")
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%q: %v; want an error naming %s", args, err, name)
		}
	}
}

// TestKindsFlagString: the kinds flag prints what it parsed, in the names
// it reads, and nothing when unset (the flag package prints its zero
// value).
func TestKindsFlagString(t *testing.T) {
	var ks []chaos.Kind
	f := kindsFlag{&ks}
	if err := f.Set("link-cut,cert-rotate"); err != nil {
		t.Fatal(err)
	}
	if got := f.String(); got != "link-cut,cert-rotate" {
		t.Errorf("String() = %q, want %q", got, "link-cut,cert-rotate")
	}
	if got := (kindsFlag{}).String(); got != "" {
		t.Errorf("zero value's String() = %q, want empty", got)
	}
}

// TestCommand: the report's reproduce line is `make chaos` with the run's
// seed and duration, as the Makefile reads them.
func TestCommand(t *testing.T) {
	o := Options{Duration: time.Hour, Seed: 256353846}
	if got, want := o.Command(), "make chaos SEED=256353846 DURATION=1h0m0s"; got != want {
		t.Errorf("Command() = %q, want %q", got, want)
	}
}
