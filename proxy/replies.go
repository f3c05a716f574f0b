package proxy

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/replproxy/replproxy/proxy/wire"
)

// The words of the error replies the commands share.

// clip shortens s for an error reply.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// unknownSub is Redis 7.0's reply to an unknown subcommand
// (commandCheckExistence): the name as C sees it, cut to 128 bytes, and the
// command in upper case.
func unknownSub(c *client, args [][]byte) {
	sub := wire.CString(string(args[1]))
	if len(sub) > 128 {
		sub = sub[:128]
	}
	c.out = wire.AppendError(c.out, fmt.Sprintf("ERR unknown subcommand '%s'. Try %s HELP.", sub, wire.Upper(wire.CString(string(args[0])))))
}

// subSyntaxError is Redis's reply to a subcommand it has, used with
// arguments it does not take (addReplySubcommandSyntaxError).
func subSyntaxError(c *client, args [][]byte) {
	sub := wire.CString(string(args[1]))
	if len(sub) > 128 {
		sub = sub[:128]
	}
	c.out = wire.AppendError(c.out, fmt.Sprintf("ERR unknown subcommand or wrong number of arguments for '%s'. Try %s HELP.",
		sub, wire.Upper(wire.CString(string(args[0])))))
}

// strerror words err as C's strerror does ("Permission denied") when it
// carries an errno, and as Go does otherwise.
func strerror(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err.Error()
	}
	msg := errno.Error()
	if msg != "" && msg[0] >= 'a' && msg[0] <= 'z' {
		msg = string(msg[0]-'a'+'A') + msg[1:]
	}
	return msg
}
