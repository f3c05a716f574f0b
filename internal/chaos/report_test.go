package chaos

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestWriteReport(t *testing.T) {
	start := time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC)
	out := func(k Kind, took time.Duration, got Cost) Outcome {
		return Outcome{Fault: Fault{Kind: k}, At: start, Converge: took, Converged: true, Want: Expected(k, "b1"), Got: got}
	}
	r := Run{
		Seed: 36, Start: start, Duration: 90 * time.Second, Command: "make chaos SEED=36 DURATION=1m30s",
		Outcomes: []Outcome{
			out(ProxyKill, 2*time.Second, Cost{}),
			out(ProxyKill, 4*time.Second, Cost{}),
			out(ProxyKill, 9*time.Second, Cost{Proxies: 1}),
			out(ReplicaKill, time.Second, Cost{Proxies: 1}),
			out(WANCut, 3*time.Second, Cost{}),
			out(WANCut, 5*time.Second, Cost{}),
			{Fault: Fault{Kind: ProxyKill, Target: "proxy-b", Inner: &Fault{Kind: WANCut}}, At: start,
				Converge: 6 * time.Second, Converged: true, Got: Cost{}},
		},
		Events:     []Event{{At: start.Add(time.Second), Action: ActFault, Kind: ProxyKill, Target: "proxy-a", Detail: "SIGKILL"}},
		Violations: []Violation{{At: start.Add(70 * time.Second), Checker: CheckFullSync, Detail: "proxy-kill of proxy-a: 1 full syncs behind the proxies"}},
		NotBuilt:   []string{"overlapping faults"},
	}
	var b bytes.Buffer
	if err := WriteReport(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"**Verdict: failed**: 1 violations (below). 7 of 7 heals converged within the bound; 1 caused more full syncs than its faults may.",
		"| full-sync | the full syncs each fault (or pair) caused, within what its kinds may cost | 1 |",
		"| converge | after each heal, every replica at the primary's `DEBUG DIGEST` within the bound | 0 |",
		"- seed: `36`",
		"- faults: 8 (6 alone, 1 pairs of two at once)",
		"- reproduce: `make chaos SEED=36 DURATION=1m30s`",
		"| proxy-kill | 4 | 3 | 3 | 4s | 9s | 0 / 0 | 1 / 0 |",
		"| replica-kill | 1 | 1 | 1 | 1s | 1s | 0 / 1 | 1 / 2 |",
		"| wan-cut | 3 | 2 | 2 | 3s | 5s | 0 / 0 | 0 / 0 |",
		"| config-set | 0 | 0 |",
		"| proxy-kill + wan-cut | 1 | 1 | 6s | 6s | 0 / 0 | 0 / 0 |",
		"(+1m10s, seed 36) **full-sync**: proxy-kill of proxy-a",
		"- overlapping faults",
		"+1s        fault proxy-kill   proxy-a    SIGKILL",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	// The summary comes first, the event log last, folded.
	md := b.String()
	summary, events, ok := strings.Cut(md, "\n## Event log\n")
	if !ok {
		t.Fatalf("no event log section:\n%s", md)
	}
	for _, heading := range []string{"## Checkers", "## Faults by kind", "## Two faults at once", "## Violations", "## Not built yet"} {
		if !strings.Contains(summary, "\n"+heading+"\n") {
			t.Errorf("the summary before the event log lacks %q", heading)
		}
	}
	if !strings.HasPrefix(events, "\n<details>\n<summary>") || !strings.HasSuffix(events, "```\n\n</details>\n") ||
		!strings.Contains(events, "(1 events)</summary>\n\n```\n+1s") {
		t.Errorf("the event log is not one folded code block:\n%s", events)
	}
	if strings.Contains(summary, "SIGKILL") {
		t.Error("an event appears in the summary")
	}

	// A run without violations passes; a checker not in the table still
	// gets its row.
	r.Violations = nil
	r.Outcomes = r.Outcomes[:2]
	b.Reset()
	if err := WriteReport(&b, r); err != nil {
		t.Fatal(err)
	}
	if want := "**Verdict: passed**: no violation. 2 of 2 heals converged within the bound; 0 caused more full syncs than its faults may."; !strings.Contains(b.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, b.String())
	}
	r.Violations = []Violation{{At: start, Checker: "new-checker", Detail: "x"}}
	b.Reset()
	if err := WriteReport(&b, r); err != nil {
		t.Fatal(err)
	}
	if want := "| new-checker | | 1 |"; !strings.Contains(b.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, b.String())
	}
}
