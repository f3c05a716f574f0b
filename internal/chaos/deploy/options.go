package deploy

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/replproxy/replproxy/internal/chaos"
)

// Options are a run's settings.
type Options struct {
	// Duration is how long the nemesis keeps picking faults.
	Duration time.Duration
	// Seed seeds the nemesis and the gaps between faults: a run is
	// reproduced from its seed.
	Seed uint64
	// Kinds, when not empty, are the only fault kinds the nemesis picks
	// (to reproduce or work on a few); empty is every kind.
	Kinds []chaos.Kind
	// Report is where the Markdown report is written; "" is the test's
	// log only.
	Report string
}

// DefaultOptions are the 90-second run with a fixed seed that `make test`
// runs. Seed 2024's schedule opens with a wipe of proxy A (restarted on an
// empty dir, everything behind it moved away and back), then a kill of
// proxy A with a WAN cut of 74 s inside it. Their holds and the gap
// between them take 85 s, so the 90-s run holds these two and no more.
// TestDefaultSchedule pins this opening, so that a change to the
// nemesis's choice is seen.
func DefaultOptions() Options {
	return Options{Duration: 90 * time.Second, Seed: 2024}
}

// Flags defines the options' flags on fs, with [DefaultOptions] as their
// defaults, and returns the options they set when fs is parsed:
// -chaos.duration, -chaos.seed, -chaos.kinds (comma-separated names, as
// [chaos.ParseKinds] reads them) and -chaos.report.
func Flags(fs *flag.FlagSet) *Options {
	o := DefaultOptions()
	fs.DurationVar(&o.Duration, "chaos.duration", o.Duration, "how long the nemesis keeps picking faults")
	fs.Uint64Var(&o.Seed, "chaos.seed", o.Seed, "the nemesis's seed")
	fs.Var(kindsFlag{&o.Kinds}, "chaos.kinds", "only these fault kinds, comma-separated (default: every kind)")
	fs.StringVar(&o.Report, "chaos.report", o.Report, "where to write the Markdown report (default: the test's log only)")
	return &o
}

// Command is the command that reproduces a run of o.
func (o Options) Command() string {
	return fmt.Sprintf("make chaos SEED=%d DURATION=%v", o.Seed, o.Duration)
}

// kindsFlag is -chaos.kinds: a list of fault kinds by name.
type kindsFlag struct{ kinds *[]chaos.Kind }

func (f kindsFlag) String() string {
	if f.kinds == nil {
		return ""
	}
	names := make([]string, len(*f.kinds))
	for i, k := range *f.kinds {
		names[i] = k.String()
	}
	return strings.Join(names, ",")
}

// Set reads a comma-separated list of kinds; "" is every kind.
func (f kindsFlag) Set(s string) error {
	if s == "" {
		*f.kinds = nil
		return nil
	}
	ks, err := chaos.ParseKinds(s)
	if err != nil {
		return err // the flag package names the flag
	}
	*f.kinds = ks
	return nil
}
