package proxy

import (
	"fmt"
	"testing"
)

// TestSentinelHelloChannel: the proxy answers Sentinel's hello channel as a
// Redis with no other subscriber would (SUBSCRIBE confirmed, PUBLISH reaching
// no one), so that Sentinel's Pub/Sub link to it stays up, and still refuses
// every other channel.
func TestSentinelHelloChannel(t *testing.T) {
	p := startProxy(t)
	a := adminDial(t, p)
	const hello = "$18\r\n__sentinel__:hello\r\n"
	refused := "-ERR replproxy relays replication only; '%s' is served for channel __sentinel__:hello only (send it to the primary)\r\n"
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"PUBLISH", "__sentinel__:hello", "127.0.0.1,26379,id,0,m,127.0.0.1,6379,0"}, ":0\r\n"},
		{[]string{"PUBLISH", "news", "x"}, fmt.Sprintf(refused, "publish")},
		{[]string{"PUBLISH", "__sentinel__:hello"}, "-ERR wrong number of arguments for 'publish' command\r\n"},
		{[]string{"SUBSCRIBE", "news"}, fmt.Sprintf(refused, "subscribe")},
		{[]string{"SUBSCRIBE", "__sentinel__:hello", "news"}, fmt.Sprintf(refused, "subscribe")},
		{[]string{"UNSUBSCRIBE"}, "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"},
		{[]string{"SUBSCRIBE", "__sentinel__:hello"}, "*3\r\n$9\r\nsubscribe\r\n" + hello + ":1\r\n"},
		{[]string{"UNSUBSCRIBE", "news"}, fmt.Sprintf(refused, "unsubscribe")},
		{[]string{"UNSUBSCRIBE"}, "*3\r\n$11\r\nunsubscribe\r\n" + hello + ":0\r\n"},
		{[]string{"SUBSCRIBE", "__sentinel__:hello"}, "*3\r\n$9\r\nsubscribe\r\n" + hello + ":1\r\n"},
		{[]string{"UNSUBSCRIBE", "__sentinel__:hello"}, "*3\r\n$11\r\nunsubscribe\r\n" + hello + ":0\r\n"},
	}
	for _, tc := range cases {
		if got := a.do(tc.args...); got != tc.want {
			t.Errorf("%q answered %q, want %q", tc.args, got, tc.want)
		}
	}
}
