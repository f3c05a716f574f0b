package load

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestPacedDue checks the schedule: over all connections exactly the
// rate's commands by every tick, each tick the rate's share rounded down
// or up, and no connection ahead of another by more than one command.
func TestPacedDue(t *testing.T) {
	for _, tt := range []struct{ rate, conns int }{{1000, 20}, {5000, 20}, {20000, 20}, {1234, 20}, {7, 3}, {50000, 8}} {
		p := Paced{Rate: tt.rate, Conns: tt.conns}.withDefaults()
		perTick := float64(tt.rate) * p.Tick.Seconds()
		perConn := perTick / float64(tt.conns)
		var prevTotal int64
		prevC := make([]int64, tt.conns)
		for tick := int64(1); tick <= 5000; tick++ {
			var total int64
			var dues []int64
			for c := range tt.conns {
				d := p.due(tick, c)
				if step := d - prevC[c]; step > int64(perConn)+1 {
					t.Fatalf("rate %d, %d conns, tick %d: conn %d writes %d at once, share %.2f", tt.rate, tt.conns, tick, c, step, perConn)
				}
				prevC[c] = d
				dues = append(dues, d)
				total += d
			}
			if want := tick * int64(tt.rate) * int64(p.Tick) / int64(time.Second); total != want {
				t.Fatalf("rate %d, %d conns, tick %d: %d due, want %d", tt.rate, tt.conns, tick, total, want)
			}
			if slices.Max(dues)-slices.Min(dues) > 1 {
				t.Fatalf("rate %d, tick %d: connections apart by more than one: %v", tt.rate, tick, dues)
			}
			if step := total - prevTotal; step < int64(perTick) || step > int64(perTick)+1 {
				t.Fatalf("rate %d, tick %d: %d commands in the tick, want %.2f rounded", tt.rate, tick, step, perTick)
			}
			prevTotal = total
		}
	}
}

func TestPacedRing(t *testing.T) {
	ring, ends := Paced{ValueSize: 3, Ring: 2}.ring(7)
	want := "*3\r\n$3\r\nSET\r\n$9\r\npaced:7:0\r\n$3\r\nxxx\r\n" + "*3\r\n$3\r\nSET\r\n$9\r\npaced:7:1\r\n$3\r\nxxx\r\n"
	if string(ring) != want || !slices.Equal(ends, []int{len(want) / 2, len(want)}) {
		t.Errorf("ring = %q, %v\nwant   %q", ring, ends, want)
	}
	p := Paced{Ring: 3, Next: func(c int) func([]byte) []byte { return counting() }}
	ring, ends = p.ring(0)
	next := counting()
	var want2 []byte
	for range 3 {
		want2 = next(want2)
	}
	if string(ring) != string(want2) || len(ends) != 3 {
		t.Errorf("ring from Next = %q, want %q", ring, want2)
	}
}

func TestPacedRun(t *testing.T) {
	addr, cmds := fakePrimary(t, "+OK\r\n")
	// A ring of 4 commands wraps every few ticks: the writev path.
	p := Paced{Addr: addr, Rate: 4000, Conns: 8, ValueSize: 100, Ring: 4}
	run, err := p.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	st, err := run.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if pr := run.Progress(); pr != st {
		t.Errorf("Progress = %+v; Stop's %+v", pr, st)
	}
	// The schedule's count at the last tick, give or take a tick's share.
	if want := float64(p.Rate) * st.Elapsed.Seconds(); float64(st.Commands) < want-5 || float64(st.Commands) > want+5 {
		t.Errorf("%d commands in %v, want %.0f", st.Commands, st.Elapsed, want)
	}
	if r := st.Rate(); r < 0.95*float64(p.Rate) || r > 1.05*float64(p.Rate) {
		t.Errorf("rate %.0f, want %d", r, p.Rate)
	}
	ring, _ := p.withDefaults().ring(0)
	if st.Bytes != st.Commands*int64(len(ring)/4) {
		t.Errorf("%d bytes for %d commands of %d", st.Bytes, st.Commands, len(ring)/4)
	}
	var seen []int
	for range p.Conns {
		seen = append(seen, <-cmds)
	}
	total := 0
	for _, n := range seen {
		total += n
	}
	if int64(total) != st.Commands || slices.Max(seen)-slices.Min(seen) > 1 {
		t.Errorf("the primary saw %v commands per connection (%d), the load wrote %d", seen, total, st.Commands)
	}
	if ticks := int64(st.Elapsed / time.Millisecond); st.Ticks != ticks || st.Wakeups > ticks || st.Wakeups < 100 || st.Missed() < 0 {
		t.Errorf("%d ticks, %d wake-ups in %v", st.Ticks, st.Wakeups, st.Elapsed)
	}
	half := PacedStats{Commands: 10, Bytes: 100, Ticks: 4, Wakeups: 2, Elapsed: time.Second}
	if d := st.Sub(half); d.Commands != st.Commands-10 || d.Ticks != st.Ticks-4 || d.Elapsed != st.Elapsed-time.Second || half.Missed() != 0.5 {
		t.Errorf("Sub = %+v, Missed = %v", d, half.Missed())
	}
}

// TestPacedNext runs commands from Next whose replies are integers.
func TestPacedNext(t *testing.T) {
	addr, cmds := fakePrimary(t, ":1\r\n")
	p := Paced{Addr: addr, Rate: 1000, Conns: 2, Next: func(c int) func([]byte) []byte { return counting() }}
	run, err := p.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	st, err := run.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if n := <-cmds + <-cmds; int64(n) != st.Commands || n == 0 {
		t.Errorf("primary saw %d commands, load wrote %d", n, st.Commands)
	}
}

func TestPacedErrorReply(t *testing.T) {
	addr, _ := fakePrimary(t, "-OOM no\r\n")
	run, err := Paced{Addr: addr, Rate: 2000, Conns: 2, ValueSize: 1}.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-run.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the load did not stop on an error reply")
	}
	if _, err := run.Stop(); !errors.Is(err, ErrReply) {
		t.Errorf("err = %v, want ErrReply", err)
	}
}

func TestPacedCancel(t *testing.T) {
	addr, _ := fakePrimary(t, "+OK\r\n")
	ctx, cancel := context.WithCancel(context.Background())
	run, err := Paced{Addr: addr, Rate: 1000, ValueSize: 10}.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	<-run.Done()
	if _, err := run.Stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if _, err := (Paced{Addr: addr}).Start(context.Background()); err == nil {
		t.Error("rate 0: no error")
	}
}
