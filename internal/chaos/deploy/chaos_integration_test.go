package deploy_test

import (
	"bytes"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/chaos"
	"github.com/replproxy/replproxy/internal/chaos/deploy"
	"github.com/replproxy/replproxy/internal/netns"
	"github.com/replproxy/replproxy/internal/redistest"
)

// opts are the run's flags; with none, TestChaos is the 90-second run with
// a fixed seed that `make test` runs, and `make chaos` sets the duration,
// seed and report.
var opts = deploy.Flags(flag.CommandLine)

// TestChaos builds the deployment, runs the load and the nemesis for
// -chaos.duration, and writes the report; every violation fails the test.
func TestChaos(t *testing.T) {
	redistest.Require(t)
	netns.Require(t)
	if testing.Short() {
		t.Skip("the chaos run takes minutes")
	}
	t.Logf("chaos: seed %d, duration %v", opts.Seed, opts.Duration)
	d := deploy.New(t, &chaos.History{Echo: t.Logf})
	run := d.Run(t.Context(), *opts)

	var report bytes.Buffer
	if err := chaos.WriteReport(&report, run); err != nil {
		t.Fatal(err)
	}
	if opts.Report != "" {
		if err := os.WriteFile(opts.Report, report.Bytes(), 0o644); err != nil {
			t.Fatalf("write the report: %v", err)
		}
	}
	t.Logf("report:\n%s", report.Bytes())
	for _, v := range run.Violations {
		t.Errorf("violation at +%v (seed %d): %s: %s", v.At.Sub(run.Start).Round(time.Millisecond), run.Seed, v.Checker, v.Detail)
	}
}
