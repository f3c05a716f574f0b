package replbuf

import "errors"

var (
	// ErrOffsetOutOfRange is returned by Attach for an offset older than the
	// first byte the stream still holds.
	ErrOffsetOutOfRange = errors.New("replbuf: offset not in backlog")

	// ErrReset is returned to a cursor whose stream started a new generation
	// (Stream.Reset) after the cursor was attached.
	ErrReset = errors.New("replbuf: stream reset to a new generation")

	// ErrReleased is returned to a cursor whose stream or snapshot was released.
	ErrReleased = errors.New("replbuf: stream released")

	// ErrClosed is returned when bytes are added to a closed stream, or a cursor
	// is attached to one.
	ErrClosed = errors.New("replbuf: stream closed")

	// ErrCursorClosed is returned by a cursor used after Close.
	ErrCursorClosed = errors.New("replbuf: cursor closed")

	// ErrAdvance is returned by Cursor.Advance for a count larger than the batch
	// last handed out by Cursor.Pending.
	ErrAdvance = errors.New("replbuf: advance beyond the pending batch")

	// ErrWindowed is returned by Snapshot.NewReader for a snapshot that keeps
	// only its latest bytes in memory (Snapshot.Window): it is read from the
	// file its producer wrote.
	ErrWindowed = errors.New("replbuf: snapshot held in memory only as a window")

	// ErrRefused fails a snapshot whose bytes the RDB walk refused (it
	// wraps rdbcheck's error: a *rdbcheck.CorruptError, rdbcheck.ErrChecksum,
	// or a payload cut before the RDB's end).
	ErrRefused = errors.New("replbuf: snapshot refused by the RDB check")

	// ErrPublish is returned by Stream.Publish for an end before the published
	// end or after the last filled byte.
	ErrPublish = errors.New("replbuf: publish outside the filled range")

	// ErrShortRead is returned by Fill (and so ReadOnce and ReadFrom) and
	// FillBuffers when the reader returns a count that cannot be: negative, or
	// more than the room it was given. Despite the name, no read is too short: a short read is
	// normal and is kept.
	ErrShortRead = errors.New("replbuf: reader returned an invalid count")
)
