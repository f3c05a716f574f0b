package netns

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// vethA and vethB are the two ends of the WAN, in namespace A and B.
	vethA = "veth-a"
	vethB = "veth-b"
	// cutDev is the ifb device of each namespace that Cut routes the other end to.
	cutDev = "cut"
	// runDir is where ip netns keeps the namespaces' names (bind mounts).
	runDir = "/run/netns"
	// maxPairs bounds the search for a free pair number in one process.
	maxPairs = 256
	// minBurst is the smallest tbf bucket: a whole GSO packet of veth (64 KiB).
	minBurst = 64 << 10
	// queueTime is how much of the rate tbf's queue holds by default.
	queueTime = 100 * time.Millisecond
	// closeTimeout bounds how long Close waits for killed processes to leave.
	closeTimeout = 5 * time.Second
)

// Options shape the WAN of a [Pair].
type Options struct {
	// RateBitsPerSec limits each direction of the WAN to this many bits per second
	// (tc tbf rate); 0 means unlimited (no qdisc is added).
	RateBitsPerSec int64
	// Burst is tbf's bucket in bytes; 0 means max(64 KiB, 1 ms at the rate).
	Burst int
	// Limit is tbf's queue in bytes; 0 means 100 ms at the rate, plus the bucket.
	Limit int
}

// Namespace is one network namespace, by its name under ip netns.
type Namespace struct {
	Name string
}

// Command returns a command that runs name with args inside n: `ip netns exec
// <n.Name> name args...`. ip execs the program, so the command's pid is the
// program's, and signals sent to it reach the program.
func (n Namespace) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Pair is two namespaces joined by a veth pair, the WAN between two regions.
type Pair struct {
	A, B         Namespace
	AddrA, AddrB string // 10.x.n.1 in A, 10.x.n.2 in B, of one /30

	opts      Options   // as given to New
	closeOnce sync.Once // Close deletes the namespaces once
	closeErr  error     // written inside closeOnce
}

// New builds a pair (see the package doc for its shape) with a WAN shaped by opts.
// The caller must Close it; on error nothing is left behind.
func New(opts Options) (*Pair, error) {
	if opts.RateBitsPerSec < 0 || opts.Burst < 0 || opts.Limit < 0 {
		return nil, fmt.Errorf("netns: negative option in %+v", opts)
	}
	pid := os.Getpid()
	for n := 0; n < maxPairs; n++ {
		p := &Pair{
			A:     Namespace{Name: fmt.Sprintf("rp%d-%da", pid, n)},
			B:     Namespace{Name: fmt.Sprintf("rp%d-%db", pid, n)},
			AddrA: fmt.Sprintf("10.%d.%d.1", 64+pid%128, n),
			AddrB: fmt.Sprintf("10.%d.%d.2", 64+pid%128, n),
			opts:  opts,
		}
		ok, err := addNamespace(p.A.Name)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // another pair of this process, or a stale one, has the number
		}
		ok, err = addNamespace(p.B.Name)
		if err != nil || !ok {
			run("ip", "netns", "del", p.A.Name)
			if err != nil {
				return nil, err
			}
			continue // a stale B of an earlier process with our pid
		}
		if err := p.build(); err != nil {
			return nil, errors.Join(err, p.Close())
		}
		return p, nil
	}
	return nil, fmt.Errorf("netns: no free pair number below %d for pid %d", maxPairs, pid)
}

// addNamespace creates namespace name. It reports false, and no error, when the
// name is taken: ip netns add creates it exclusively.
func addNamespace(name string) (bool, error) {
	err := run("ip", "netns", "add", name)
	if err == nil {
		return true, nil
	}
	if _, statErr := os.Stat(filepath.Join(runDir, name)); statErr == nil {
		return false, nil
	}
	return false, err
}

// build sets up the links, addresses and qdiscs of two fresh namespaces.
func (p *Pair) build() error {
	// No IPv6 on the WAN: its neighbour discovery and multicast reports would
	// cross the veth uninvited, and Cut would not stop them (its routes are IPv4).
	for _, ns := range []Namespace{p.A, p.B} {
		if err := ns.disableIPv6(); err != nil {
			return err
		}
	}
	steps := [][]string{
		{"ip", "-n", p.A.Name, "link", "set", "lo", "up"},
		{"ip", "-n", p.B.Name, "link", "set", "lo", "up"},
		// Both ends are created in their namespaces directly: no name is ever
		// taken in the namespace of the caller.
		{"ip", "link", "add", "name", vethA, "netns", p.A.Name, "type", "veth", "peer", "name", vethB, "netns", p.B.Name},
		{"ip", "-n", p.A.Name, "addr", "add", p.AddrA + "/30", "dev", vethA},
		{"ip", "-n", p.B.Name, "addr", "add", p.AddrB + "/30", "dev", vethB},
		{"ip", "-n", p.A.Name, "link", "set", vethA, "up"},
		{"ip", "-n", p.B.Name, "link", "set", vethB, "up"},
		{"ip", "-n", p.A.Name, "link", "add", cutDev, "type", "ifb"},
		{"ip", "-n", p.B.Name, "link", "add", cutDev, "type", "ifb"},
		{"ip", "-n", p.A.Name, "link", "set", cutDev, "up"},
		{"ip", "-n", p.B.Name, "link", "set", cutDev, "up"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	if p.opts.RateBitsPerSec > 0 {
		return p.SetRate(p.opts.RateBitsPerSec)
	}
	return nil
}

// SetRate limits each direction of the WAN to bitsPerSec (0: unlimited), with the
// pair's Burst and Limit options (or their defaults at the new rate). Connections
// carry on; what tbf holds queued when the rate changes may be dropped.
func (p *Pair) SetRate(bitsPerSec int64) error {
	if bitsPerSec < 0 {
		return fmt.Errorf("netns: negative rate %d", bitsPerSec)
	}
	for _, end := range []struct{ ns, dev string }{{p.A.Name, vethA}, {p.B.Name, vethB}} {
		if bitsPerSec == 0 {
			// Deleting the root qdisc restores the default; only when there is one.
			out, err := output("tc", "-n", end.ns, "qdisc", "show", "dev", end.dev, "root")
			if err != nil {
				return err
			}
			if !strings.Contains(out, "tbf") {
				continue
			}
			if err := run("tc", "-n", end.ns, "qdisc", "del", "dev", end.dev, "root"); err != nil {
				return err
			}
			continue
		}
		burst, limit := shape(bitsPerSec, p.opts)
		err := run("tc", "-n", end.ns, "qdisc", "replace", "dev", end.dev, "root", "tbf",
			"rate", strconv.FormatInt(bitsPerSec, 10)+"bit",
			"burst", strconv.Itoa(burst), "limit", strconv.Itoa(limit))
		if err != nil {
			return err
		}
	}
	return nil
}

// shape returns tbf's bucket and queue in bytes for a rate, from opts or defaults.
func shape(bitsPerSec int64, opts Options) (burst, limit int) {
	bytesPerSec := bitsPerSec / 8
	burst = opts.Burst
	if burst == 0 {
		burst = max(minBurst, int(bytesPerSec/1000))
	}
	limit = opts.Limit
	if limit == 0 {
		limit = int(bytesPerSec*int64(queueTime)/int64(time.Second)) + burst
	}
	return burst, limit
}

// Cut takes the WAN down both ways: what either end sends to the other is dropped
// silently (see the package doc). Cutting a cut WAN does nothing.
func (p *Pair) Cut() error {
	for _, end := range []struct{ ns, peer string }{{p.A.Name, p.AddrB}, {p.B.Name, p.AddrA}} {
		if err := run("ip", "-n", end.ns, "route", "replace", end.peer+"/32", "dev", cutDev); err != nil {
			return err
		}
	}
	return nil
}

// Restore brings a cut WAN up again. Restoring a WAN that is up does nothing.
func (p *Pair) Restore() error {
	for _, end := range []struct{ ns, peer string }{{p.A.Name, p.AddrB}, {p.B.Name, p.AddrA}} {
		out, err := output("ip", "-n", end.ns, "route", "show", "dev", cutDev)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) == "" {
			continue
		}
		if err := run("ip", "-n", end.ns, "route", "del", end.peer+"/32", "dev", cutDev); err != nil {
			return err
		}
	}
	return nil
}

// Counters returns the bytes that crossed the WAN so far: sent by A's end to B and
// by B's end to A (the veth ends' tx counters, headers included).
func (p *Pair) Counters() (aToB, bToA int64, err error) {
	if aToB, err = txBytes(p.A.Name, vethA); err != nil {
		return 0, 0, err
	}
	if bToA, err = txBytes(p.B.Name, vethB); err != nil {
		return 0, 0, err
	}
	return aToB, bToA, nil
}

// txBytes reads dev's tx byte counter in namespace ns.
func txBytes(ns, dev string) (int64, error) {
	out, err := output("ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev)
	if err != nil {
		return 0, err
	}
	var links []struct {
		Stats64 struct {
			TX struct {
				Bytes int64 `json:"bytes"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		return 0, fmt.Errorf("netns: counters of %s in %s: %w", dev, ns, err)
	}
	if len(links) != 1 {
		return 0, fmt.Errorf("netns: counters of %s in %s: %d links listed", dev, ns, len(links))
	}
	return links[0].Stats64.TX.Bytes, nil
}

// Close kills every process left in the two namespaces and deletes them, which
// deletes the veth pair. It is idempotent and returns the first call's result.
func (p *Pair) Close() error {
	p.closeOnce.Do(func() {
		var errs []error
		for _, ns := range []Namespace{p.A, p.B} {
			if _, err := os.Stat(filepath.Join(runDir, ns.Name)); err != nil {
				continue // never created (New failed half-way)
			}
			if err := killAll(ns.Name); err != nil {
				errs = append(errs, err)
			}
			if err := run("ip", "netns", "del", ns.Name); err != nil {
				errs = append(errs, err)
			}
		}
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// killAll SIGKILLs the processes in namespace ns until none is left, or
// closeTimeout passes. A killed process leaves the list once the kernel has
// torn it down (a zombie is no longer in the namespace).
func killAll(ns string) error {
	deadline := time.Now().Add(closeTimeout)
	for {
		out, err := output("ip", "netns", "pids", ns)
		if err != nil {
			return err
		}
		// Never this process: a thread of ours that could not leave the
		// namespace (see Namespace.do) would make ip list our own pid.
		pids := slices.DeleteFunc(strings.Fields(out), func(s string) bool { return s == strconv.Itoa(os.Getpid()) })
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netns: processes %v still in %s after SIGKILL", pids, ns)
		}
		for _, s := range pids {
			pid, err := strconv.Atoi(s)
			if err != nil {
				return fmt.Errorf("netns: pids of %s: %q: %w", ns, s, err)
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("netns: kill %d in %s: %w", pid, ns, err)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Supported reports why pairs cannot be built here (not root, no ip or tc, a
// kernel without namespaces, veth, ifb or tbf), or nil: it builds one pair with a
// rate limit and closes it.
func Supported() error {
	if os.Geteuid() != 0 {
		return errors.New("netns: not root (network namespaces need CAP_NET_ADMIN and CAP_SYS_ADMIN)")
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("netns: %s (iproute2) not found: %w", tool, err)
		}
	}
	p, err := New(Options{RateBitsPerSec: 100e6})
	if err != nil {
		return err
	}
	return p.Close()
}

// run runs a command and returns an error holding its output if it fails.
func run(name string, args ...string) error {
	_, err := output(name, args...)
	return err
}

// output runs a command and returns its standard output, or an error holding
// its standard error.
func output(name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("netns: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
