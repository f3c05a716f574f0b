package redistest

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// TestTCPPair: the two ends are connected to each other, both ways.
func TestTCPPair(t *testing.T) {
	dialed, accepted := TCPPair(t)
	for _, dir := range []struct{ from, to net.Conn }{{dialed, accepted}, {accepted, dialed}} {
		want := []byte("from " + dir.from.LocalAddr().String())
		if _, err := dir.from.Write(want); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		dir.to.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(dir.to, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
	}
}
