package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Outcome is what one fault cost, measured after its heal.
type Outcome struct {
	Fault    Fault
	At       time.Time     // when the fault was applied
	Converge time.Duration // from the heal to every replica at the primary's digest
	// Converged is false when the bound passed first (a converge violation).
	Converged bool
	Want, Got Cost // full syncs expected and caused
}

// Run is a whole run, as the report renders it.
type Run struct {
	Seed       uint64
	Start      time.Time
	Duration   time.Duration
	Command    string // the command that reproduces the run
	Outcomes   []Outcome
	Events     []Event
	Violations []Violation
	// NotBuilt lists what this harness does not do yet, so that the report
	// never claims it.
	NotBuilt []string
}

// checkerTable is every checker, in the order the report lists them, with
// what it checks.
var checkerTable = []struct{ name, checks string }{
	{CheckConverge, "after each heal, every replica at the primary's `DEBUG DIGEST` within the bound"},
	{CheckReplID, "every replica's replid is the primary's replid or replid2"},
	{CheckOffsets, "no replica's offset goes backwards within a replid"},
	{CheckFullSync, "the full syncs each fault (or pair) caused, within what its kinds may cost"},
	{CheckLogs, "no panic and no data race in a proxy's log or stderr"},
	{CheckMemory, "a proxy's memory within maxmemory and its limits"},
	{CheckBaseline, "after each heal, a proxy's goroutines and descriptors back within a slack of their baseline"},
	{CheckCert, "a rotated certificate is the one new handshakes get"},
}

// WriteReport writes r as Markdown: the summary first (the verdict, the
// run's figures, the checkers' results, the cost of each kind of fault and
// of each pair, the violations, what is not built), then the event log,
// folded in a <details> element so that the summary reads as one page.
func WriteReport(w io.Writer, r Run) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Chaos run\n\n")
	var twoAtOnce, converged, over int
	for _, o := range r.Outcomes {
		if o.Fault.Inner != nil {
			twoAtOnce++
		}
		if o.Converged {
			converged++
		}
		if o.Got.Primary > o.Want.Primary || o.Got.Proxies > o.Want.Proxies {
			over++
		}
	}
	verdict, why := "passed", "no violation"
	if len(r.Violations) > 0 {
		verdict, why = "failed", fmt.Sprintf("%d violations (below)", len(r.Violations))
	}
	fmt.Fprintf(&b, "**Verdict: %s**: %s. %d of %d heals converged within the bound; %d caused more full syncs than its faults may.\n\n",
		verdict, why, converged, len(r.Outcomes), over)
	fmt.Fprintf(&b, "- seed: `%d`\n- started: %s\n- duration: %v\n- faults: %d (%d alone, %d pairs of two at once)\n- violations: %d\n",
		r.Seed, r.Start.UTC().Format(time.RFC3339), r.Duration.Round(time.Second),
		len(r.Outcomes)+twoAtOnce, len(r.Outcomes)-twoAtOnce, twoAtOnce, len(r.Violations))
	if r.Command != "" {
		fmt.Fprintf(&b, "- reproduce: `%s`\n", r.Command)
	}
	byChecker := map[string]int{}
	for _, v := range r.Violations {
		byChecker[v.Checker]++
	}
	fmt.Fprintf(&b, "\n## Checkers\n\n")
	fmt.Fprintf(&b, "| checker | what it checks | violations |\n|---|---|---:|\n")
	for _, c := range checkerTable {
		fmt.Fprintf(&b, "| %s | %s | %d |\n", c.name, c.checks, byChecker[c.name])
		delete(byChecker, c.name)
	}
	for _, name := range slices.Sorted(maps.Keys(byChecker)) {
		fmt.Fprintf(&b, "| %s | | %d |\n", name, byChecker[name])
	}
	fmt.Fprintf(&b, "\n## Faults by kind\n\n")
	fmt.Fprintf(&b, "A fault's count includes those applied together with another (below); the other columns are of the faults applied alone.\n\n")
	fmt.Fprintf(&b, "| kind | count | alone | converged | converge median | converge worst | full syncs at the primary (caused / expected at most) | full syncs behind the proxies (caused / expected at most) |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range Kinds() {
		var count int
		var alone []Outcome
		for _, o := range r.Outcomes {
			if o.Fault.Kind == k {
				count++
			}
			if o.Fault.Inner != nil && o.Fault.Inner.Kind == k {
				count++
			}
			if o.Fault.Kind == k && o.Fault.Inner == nil {
				alone = append(alone, o)
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %s\n", k, count, costColumns(alone))
	}
	pairs := map[string][]Outcome{}
	var names []string
	for _, o := range r.Outcomes {
		if o.Fault.Inner == nil {
			continue
		}
		name := o.Fault.Kind.String() + " + " + o.Fault.Inner.Kind.String()
		if _, ok := pairs[name]; !ok {
			names = append(names, name)
		}
		pairs[name] = append(pairs[name], o)
	}
	if len(names) > 0 {
		slices.Sort(names)
		fmt.Fprintf(&b, "\n## Two faults at once\n\n")
		fmt.Fprintf(&b, "The second fault applied while the first held, and healed before it; what both may cost is the sum of what each may.\n\n")
		fmt.Fprintf(&b, "| first + second | count | converged | converge median | converge worst | full syncs at the primary (caused / expected at most) | full syncs behind the proxies (caused / expected at most) |\n")
		fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|\n")
		for _, name := range names {
			fmt.Fprintf(&b, "| %s | %s\n", name, costColumns(pairs[name]))
		}
	}
	fmt.Fprintf(&b, "\n## Violations\n\n")
	if len(r.Violations) == 0 {
		fmt.Fprintf(&b, "None.\n")
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "- %s (+%v, seed %d) **%s**: %s\n", v.At.UTC().Format("15:04:05.000"),
			v.At.Sub(r.Start).Round(time.Millisecond), r.Seed, v.Checker, v.Detail)
	}
	if len(r.NotBuilt) > 0 {
		fmt.Fprintf(&b, "\n## Not built yet\n\n")
		for _, n := range r.NotBuilt {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	fmt.Fprintf(&b, "\n## Event log\n\n<details>\n<summary>Every fault, heal, move and note of the run, by its time into the run (%d events)</summary>\n\n```\n",
		len(r.Events))
	for _, e := range r.Events {
		fmt.Fprintf(&b, "+%-9v %-5s %-12s %-10s %s\n", e.At.Sub(r.Start).Round(time.Millisecond), e.Action, e.Kind, e.Target, e.Detail)
	}
	fmt.Fprintf(&b, "```\n\n</details>\n")
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("chaos: write report: %w", err)
	}
	return nil
}

// medianWorst returns the median (the lower of the two middle values for
// an even count, so that two faults do not report their worst twice) and
// the largest of ds (not empty).
func medianWorst(ds []time.Duration) (median, worst time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)/2], s[len(s)-1]
}

// costColumns renders the columns after a row's name and count for os:
// how many, how many converged, the median and worst time to converge, and
// the full syncs caused against expected, summed.
func costColumns(os []Outcome) string {
	if len(os) == 0 {
		return "0 | | | | | |"
	}
	var times []time.Duration
	var converged int
	var got, want Cost
	for _, o := range os {
		times = append(times, o.Converge)
		if o.Converged {
			converged++
		}
		got.Primary += o.Got.Primary
		got.Proxies += o.Got.Proxies
		want.Primary += o.Want.Primary
		want.Proxies += o.Want.Proxies
	}
	med, worst := medianWorst(times)
	return fmt.Sprintf("%d | %d | %v | %v | %d / %d | %d / %d |", len(os), converged,
		med.Round(10*time.Millisecond), worst.Round(10*time.Millisecond), got.Primary, want.Primary, got.Proxies, want.Proxies)
}
