package wire

import "errors"

// ErrLineTooLong is returned by [CommandReader.ReadReplyLine] when a reply line is longer
// than the caller's limit.
var ErrLineTooLong = errors.New("wire: line too long")

// ErrQueryLimit is returned by [CommandReader.ReadCommand] when a command would grow past
// [Limits.MaxQuery]. Redis sends no reply for it: it closes the client.
var ErrQueryLimit = errors.New("wire: query buffer limit reached")

// ProtocolError reports bytes that break the RESP grammar. The framing of the connection is
// lost after one: the [CommandReader] or [StreamScanner] that returned it returns it again on
// every later call, and the caller closes the connection, as redis-server does.
type ProtocolError struct {
	// Msg is the text redis-server replies with, without the "ERR " code, for example
	// "Protocol error: invalid bulk length". A client gets AppendError(b, "ERR "+e.Msg).
	Msg string
	// Offset is the replication offset of the offending byte for a [StreamScanner], and -1
	// for a [CommandReader], which does not count bytes.
	Offset int64
}

func (e *ProtocolError) Error() string { return e.Msg }

// Protocol error texts. Where redis-server has a reply for the same fault
// (processInlineBuffer, processMultibulkBuffer in networking.c), the text is the same.
const (
	msgTooBigInline        = "Protocol error: too big inline request"
	msgUnbalancedQuotes    = "Protocol error: unbalanced quotes in request"
	msgTooBigMultibulk     = "Protocol error: too big mbulk count string"
	msgTooBigBulk          = "Protocol error: too big bulk count string"
	msgInvalidMultibulkLen = "Protocol error: invalid multibulk length"
	msgInvalidBulkLen      = "Protocol error: invalid bulk length"
	msgUnauthMultibulkLen  = "Protocol error: unauthenticated multibulk length"
	msgUnauthBulkLen       = "Protocol error: unauthenticated bulk length"
	msgExpectedDollar      = "Protocol error: expected '$', got '" // + the byte + "'"

	// No redis-server reply exists for these two: Redis skips the two bytes after a bulk
	// without looking at them, and closes a master link that sends a non-empty inline line
	// (it logs "Master using the inline protocol. Desync?").
	msgBadBulkEnding  = "Protocol error: invalid bulk line ending"
	msgInlineFromPeer = "Protocol error: master using the inline protocol"
)

func protocolError(msg string) *ProtocolError { return &ProtocolError{Msg: msg, Offset: -1} }

func expectedDollar(got byte) string { return msgExpectedDollar + string([]byte{got}) + "'" }

// A RefusedError is a peer's error reply to what was asked of it: a
// primary's to a side link's REPLCONF or PSYNC, or in place of its payload.
// Reply is the line as the peer sent it ("-ERR ..."), for the proxy to pass
// on to a client that asked the same.
type RefusedError struct {
	Command string // what was refused: REPLCONF rdb-filter-only, PSYNC, the payload
	Reply   string
}

// refusedErrorClip bounds the reply an error message quotes.
const refusedErrorClip = 120

func (e *RefusedError) Error() string {
	r := e.Reply
	if len(r) > refusedErrorClip {
		r = r[:refusedErrorClip] + "..."
	}
	return e.Command + ": " + r
}
