package proxy

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// replicaLine returns the fields of the slaveN line of INFO replication
// whose replica listens on port, or nil when none does.
func replicaLine(info map[string]string, port int) map[string]string {
	for k, v := range info {
		if !infoSlaveLine.MatchString(k) {
			continue
		}
		fields := map[string]string{}
		for _, kv := range strings.Split(v, ",") {
			name, value, _ := strings.Cut(kv, "=")
			fields[name] = value
		}
		if fields["port"] == strconv.Itoa(port) {
			return fields
		}
	}
	return nil
}

// replicaDelays is one replica's two ages as INFO and /metrics show them,
// in seconds.
type replicaDelays struct {
	unsent, unacked         float64 // INFO's unsent_ms and unacked_ms
	unsentSeries, unackedSr float64 // the gauges
}

// readDelays reads a replica's ages from INFO and from /metrics, in that
// order; missing names what either lacks (the unacked gauge is absent
// until the replica's first ACK).
func readDelays(t testing.TB, p *testProxy, xc *redistest.Client, port int) (d replicaDelays, missing string) {
	t.Helper()
	line := replicaLine(xc.Info(t, "replication"), port)
	if line == nil {
		return d, "slaveN line for the replica on port " + strconv.Itoa(port)
	}
	for _, f := range []struct {
		name string
		to   *float64
	}{{"unsent_ms", &d.unsent}, {"unacked_ms", &d.unacked}} {
		ms, err := strconv.ParseFloat(line[f.name], 64)
		if err != nil {
			t.Fatalf("slaveN %s=%q: %v", f.name, line[f.name], err)
		}
		*f.to = ms / 1000
	}
	m := scrape(t, p)
	labels := `{replica_ip="` + line["ip"] + `",replica_port="` + line["port"] + `"}`
	for _, f := range []struct {
		series string
		to     *float64
	}{{"replproxy_replica_unsent_age_seconds", &d.unsentSeries}, {"replproxy_replica_unacked_age_seconds", &d.unackedSr}} {
		v, ok := m[f.series+labels]
		if !ok {
			return d, f.series + labels
		}
		*f.to = v
	}
	return d, ""
}

// mustReadDelays is readDelays, failing the test when a figure is missing.
func mustReadDelays(t testing.TB, p *testProxy, xc *redistest.Client, port int) replicaDelays {
	t.Helper()
	d, missing := readDelays(t, p, xc, port)
	if missing != "" {
		t.Fatalf("no %s", missing)
	}
	return d
}

// TestReplicaDelayStopped: two real replicas behind the proxy, writes
// flowing at a steady pace (each followed by a WAIT, whose GETACK the proxy
// relays, so that the replicas acknowledge within milliseconds instead of
// once a second), and one of them stopped (SIGSTOP) for a little over a
// second, with a burst of 8 MiB right after the stop that fills its socket
// buffers, so that the bytes after it wait in the proxy. During the stop,
// INFO's unsent_ms and unacked_ms for it, and its gauges, show about how
// long it has been stopped, and the other replica's stay small; resumed,
// its figures fall back, and the relay-delay histogram has the writes that
// waited for it. A probe published on the primary as the stop begins, and
// received by a subscriber of the stopped replica once it resumes, saw the
// delay INFO's last reading showed, plus the time from that reading to the
// resume.
func TestReplicaDelayStopped(t *testing.T) {
	primary, pc := startPrimary(t)
	p := metricsProxy(t, replicaOf(primary)...)
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	servers, rcs := redistest.StartReplicas(t, 2, p.AddrString())
	writeMixed(t, pc, 100)
	dsWaitSynced(t, pc, rcs...)
	stopped, healthy := servers[0].Port(), servers[1].Port()
	sub := redistest.Dial(t, servers[0].Addr())
	sub.MustDo(t, "SUBSCRIBE", "delay:probe")

	wc := redistest.Dial(t, primary.Addr())
	stop, writerDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(writerDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := wc.Do("SET", "delay:tick", i); err != nil {
				t.Errorf("writer: %v", err)
				return
			}
			if _, err := wc.Do("WAIT", 1, 100); err != nil {
				t.Errorf("writer: %v", err)
				return
			}
		}
	}()
	defer func() {
		close(stop)
		<-writerDone
	}()

	// Steady state: both replicas' figures small.
	const small = 0.5 // seconds: a loaded 2-core machine's scheduling, not a stop
	redistest.WaitFor(t, 10*time.Second, "both replicas' delays small", func() bool {
		for _, port := range []int{stopped, healthy} {
			d, missing := readDelays(t, p, xc, port)
			if missing != "" || d.unsent > small || d.unacked > small || d.unsentSeries > small || d.unackedSr > small {
				return false
			}
		}
		return true
	})

	pausedAt := time.Now()
	servers[0].Pause()
	pc.MustDo(t, "PUBLISH", "delay:probe", "stop")
	probeSent := time.Now()
	dsSetBig(t, pc, "delay:burst", 16, 16, 512<<10)
	// The unsent figures count from the first byte the stopped replica's
	// full socket could not take, which came with the burst: by the time
	// the proxy holds the whole burst it has waited. On a loaded machine
	// that is a few hundred milliseconds after the stop, so their lower
	// bound counts from there, not from the stop.
	burstEnd := pc.InfoInt(t, "replication", "master_repl_offset")
	redistest.WaitFor(t, 10*time.Second, "the proxy holding the burst", func() bool {
		return xc.InfoInt(t, "replication", "master_repl_offset") >= burstEnd
	})
	burstIn := time.Since(pausedAt)
	checked := 0
	var last replicaDelays // the last reading during the stop
	var lastAt time.Time   // when it ended
	// A little over a second, and at least three checked readings however
	// slowly a loaded machine answers them.
	for since := time.Since(pausedAt); since < 1200*time.Millisecond || (checked < 3 && since < 4*time.Second); since = time.Since(pausedAt) {
		d := mustReadDelays(t, p, xc, stopped)
		o := mustReadDelays(t, p, xc, healthy)
		until := time.Since(pausedAt) // the figures were read between since and until
		last, lastAt = d, pausedAt.Add(until)
		t.Logf("stopped %.3f–%.3f s: unsent %.3f / %.3f, unacked %.3f / %.3f (INFO / gauge); the other's unsent %.3f, unacked %.3f",
			since.Seconds(), until.Seconds(), d.unsent, d.unsentSeries, d.unacked, d.unackedSr, o.unsent, o.unacked)
		if since >= 500*time.Millisecond && since-burstIn >= 300*time.Millisecond {
			checked++
			hi := until.Seconds() + 0.5
			for _, x := range []struct {
				what string
				v    float64
				lo   float64
			}{
				{"unsent_ms", d.unsent, 0.8 * (since - burstIn).Seconds()},
				{"unsent gauge", d.unsentSeries, 0.8 * (since - burstIn).Seconds()},
				{"unacked_ms", d.unacked, 0.8 * since.Seconds()},
				{"unacked gauge", d.unackedSr, 0.8 * since.Seconds()},
			} {
				if x.v < x.lo || x.v > hi {
					t.Errorf("stopped replica after %.3f–%.3f s (the burst in by %.3f s): %s %.3f s, want within [%.3f, %.3f]", since.Seconds(), until.Seconds(), burstIn.Seconds(), x.what, x.v, x.lo, hi)
				}
			}
			for _, x := range []struct {
				what string
				v    float64
			}{{"unsent_ms", o.unsent}, {"unsent gauge", o.unsentSeries}, {"unacked_ms", o.unacked}, {"unacked gauge", o.unackedSr}} {
				if x.v > small {
					t.Errorf("the other replica, %.3f s into the stop: %s %.3f s, want at most %.1f", since.Seconds(), x.what, x.v, small)
				}
			}
		}
		if t.Failed() {
			break
		}
		// One reading every 100 ms: the stop is the test's subject, its
		// length the measure.
		time.Sleep(100 * time.Millisecond)
	}
	servers[0].Resume()
	resumedAt := time.Now()
	if checked < 3 {
		t.Fatalf("%d readings during the stop, want at least 3", checked)
	}
	msg, err := sub.Receive()
	if err != nil {
		t.Fatalf("the probe on the stopped replica: %v", err)
	}
	probeDelay := time.Since(probeSent)
	if a := msg.Array(); len(a) != 3 || a[2].String() != "stop" {
		t.Fatalf("the probe on the stopped replica: %v", msg)
	}
	// The probe waited from the stop to the resume and a little after;
	// INFO's last reading, plus the time from it to the resume, is what it
	// should have seen, within the probe's own delivery and the readings'
	// scheduling.
	want := last.unacked + resumedAt.Sub(lastAt).Seconds()
	t.Logf("probe delay %.3f s; INFO's last unacked %.3f s + %.3f s to the resume = %.3f s",
		probeDelay.Seconds(), last.unacked, resumedAt.Sub(lastAt).Seconds(), want)
	if d := probeDelay.Seconds() - want; d < -0.1 || d > 0.3 {
		t.Errorf("the probe saw %.3f s, INFO's figures say %.3f s", probeDelay.Seconds(), want)
	}

	redistest.WaitFor(t, 10*time.Second, "the resumed replica's delays small again", func() bool {
		d, missing := readDelays(t, p, xc, stopped)
		return missing == "" && d.unsent <= small && d.unacked <= small && d.unsentSeries <= small && d.unackedSr <= small
	})
	// The writes that waited for it: at least one carried a byte that had
	// waited half a second or more, from its write loop (a socket that
	// would block is the write loop's); the other replica was sent inline.
	m := scrape(t, p)
	loop := m[`replproxy_relay_delay_seconds_count{path="loop"}`]
	quick := m[`replproxy_relay_delay_seconds_bucket{le="0.5",path="loop"}`]
	if loop-quick < 1 {
		t.Errorf("relay delays from the write loop: %v writes, %v within 0.5 s; want one that waited longer", loop, quick)
	}
	if inline := m[`replproxy_relay_delay_seconds_count{path="inline"}`]; inline < 1 {
		t.Errorf("relay delays inline: %v writes, want some", inline)
	}
}
