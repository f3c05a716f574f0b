package netns

import (
	"fmt"
	"strconv"
	"strings"
)

// The policy routing of CutFlow: its rules come before the local table's,
// which moves from preference 0 (the kernel's) to localPref, and send what
// they match to flowTable, whose routes lead to the cut device.
const (
	flowPref  = "10"
	localPref = "100"
	flowTable = "100"
)

// AddLocalAddr adds addr, as a /32 on lo, to n: a second address of the
// region for a process to listen on and dial from (bind-source-addr), so
// that [Namespace.CutFlow] can tell its connections from its neighbours'.
func (n Namespace) AddLocalAddr(addr string) error {
	return run("ip", "-n", n.Name, "addr", "add", addr+"/32", "dev", "lo")
}

// CutFlow black-holes, inside n, the TCP traffic between from and port
// port of to, both ways, as [Pair.Cut] does the WAN's: what either sends
// the other on that port is routed to the cut device and dropped silently,
// so an established connection stalls and a new one times out, while
// everything else of both addresses carries on. Both are addresses of n
// (a process and its primary in one region). Cutting a cut flow again does
// nothing.
func (n Namespace) CutFlow(from, to string, port int) error {
	// Traffic between two local addresses is routed by the local table,
	// whose rule comes first: move it behind the cut rules, once.
	out, err := output("ip", "-n", n.Name, "rule", "show", "pref", "0")
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) != "" {
		if err := run("ip", "-n", n.Name, "rule", "add", "pref", localPref, "lookup", "local"); err != nil {
			return err
		}
		if err := run("ip", "-n", n.Name, "rule", "del", "pref", "0"); err != nil {
			return err
		}
	}
	p := strconv.Itoa(port)
	steps := [][]string{
		{"ip", "-n", n.Name, "route", "replace", to + "/32", "dev", cutDev, "table", flowTable},
		{"ip", "-n", n.Name, "route", "replace", from + "/32", "dev", cutDev, "table", flowTable},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	rules := [][]string{
		{"from", from, "to", to, "ipproto", "tcp", "dport", p},
		{"from", to, "to", from, "ipproto", "tcp", "sport", p},
	}
	for _, r := range rules {
		shown, err := output("ip", append([]string{"-n", n.Name, "rule", "show", "pref", flowPref}, r...)...)
		if err != nil {
			return err
		}
		if strings.TrimSpace(shown) != "" {
			continue
		}
		if err := run("ip", append([]string{"-n", n.Name, "rule", "add", "pref", flowPref}, append(r, "lookup", flowTable)...)...); err != nil {
			return err
		}
	}
	return nil
}

// RestoreFlows ends every cut of [Namespace.CutFlow] in n; established
// connections carry on at their next retransmission.
func (n Namespace) RestoreFlows() error {
	for range 64 {
		out, err := output("ip", "-n", n.Name, "rule", "show", "pref", flowPref)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) == "" {
			return nil
		}
		if err := run("ip", "-n", n.Name, "rule", "del", "pref", flowPref); err != nil {
			return err
		}
	}
	return fmt.Errorf("netns: cut flows of %s still there after 64 deletions", n.Name)
}
