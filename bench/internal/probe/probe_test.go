package probe

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func TestSummarise(t *testing.T) {
	var xs []float64
	for i := 1000; i >= 1; i-- {
		xs = append(xs, float64(i))
	}
	q := Summarise(xs)
	want := Quantiles{N: 1000, P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000}
	if q != want {
		t.Fatalf("got %+v, want %+v", q, want)
	}
	if xs[0] != 1000 {
		t.Fatal("Summarise sorted its argument")
	}
	if q := Summarise(nil); q.N != 0 {
		t.Fatalf("empty: %+v", q)
	}
}

func TestMeasure(t *testing.T) {
	ms := time.Millisecond
	sent := []time.Duration{0, 10 * ms, 20 * ms, 30 * ms}
	a := map[int]time.Duration{0: 1 * ms, 1: 11 * ms, 2: 22 * ms, 3: 31 * ms}
	b := map[int]time.Duration{0: 2 * ms, 1: 13 * ms, 3: 30*ms + 500*time.Microsecond}
	d := Measure(sent, 1, 4, []map[int]time.Duration{a, b})
	if d.Lost != 1 { // message 2 never reached b
		t.Fatalf("lost %d, want 1", d.Lost)
	}
	wantLast, wantFirst := []float64{3000, 1000}, []float64{1000, 500}
	for i := range wantLast {
		if d.Last[i] != wantLast[i] || d.First[i] != wantFirst[i] {
			t.Fatalf("got last %v first %v, want %v %v", d.Last, d.First, wantLast, wantFirst)
		}
	}
}

func TestReadArray(t *testing.T) {
	rd := bufio.NewReader(strings.NewReader("*3\r\n$7\r\nmessage\r\n$11\r\nbench:probe\r\n$6\r\n12:345\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n+OK\r\n"))
	got, err := readArray(rd)
	if err != nil || len(got) != 3 || got[0] != "message" || got[2] != "12:345" {
		t.Fatalf("got %q, %v", got, err)
	}
	if got, err = readArray(rd); err != nil || got[2] != "1" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err = readArray(rd); err == nil {
		t.Fatal("a simple string read as an array")
	}
}

// TestPublishSubscribe runs a publisher and a subscriber against a fake
// server that hands every PUBLISH straight to the subscriber as a message.
func TestPublishSubscribe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	subscribed := make(chan net.Conn, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				rd := bufio.NewReader(c)
				for {
					args, err := readArray(rd)
					if err != nil {
						return
					}
					switch strings.ToUpper(args[0]) {
					case "SUBSCRIBE":
						c.Write([]byte("*3\r\n$9\r\nsubscribe\r\n$11\r\nbench:probe\r\n:1\r\n"))
						subscribed <- c
					case "PUBLISH":
						s := <-subscribed
						s.Write(appendCommand(nil, "message", args[1], args[2]))
						subscribed <- s
						c.Write([]byte(":1\r\n"))
					}
				}
			}()
		}
	}()
	ctx := context.Background()
	clock := NewClock()
	sub, err := Subscribe(ctx, ln.Addr().String(), clock)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := Publisher{Addr: ln.Addr().String(), Every: time.Millisecond, Clock: clock}.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for pub.Sent() < 20 || !sub.Has(19) {
		if time.Now().After(deadline) {
			t.Fatalf("sent %d, message 19 not received", pub.Sent())
		}
		time.Sleep(time.Millisecond)
	}
	sent, err := pub.Stop()
	if err != nil {
		t.Fatal(err)
	}
	d := Measure(sent, 0, 20, []map[int]time.Duration{sub.Close()})
	if d.Lost != 0 || len(d.Last) != 20 {
		t.Fatalf("lost %d, measured %d", d.Lost, len(d.Last))
	}
	for _, us := range d.Last {
		if us <= 0 || us > 5e6 {
			t.Fatalf("delay %v µs", us)
		}
	}
}
