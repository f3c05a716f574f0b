package downstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// The write loop's payloads: a snapshot in memory (sendSnapshot) or a file
// in dir (sendFile), under its "$" header, paced for a downstream proxy
// from payloadStart to payloadEnd.

// spillChunk is how much of a spilled snapshot one sendfile call may send
// under one write deadline.
const spillChunk = 4 << 20

// errSnapshotFailed ends the sync of a replica whose snapshot failed before
// its payload could start.
var errSnapshotFailed = errors.New("proxy: snapshot failed before its payload was sent")

// sendSnapshot sends the payload: "$<len>" and the bytes when the snapshot is
// complete; "$EOF:<mark>", the bytes as they arrive and the mark when it is
// still arriving and the replica takes EOF marks; otherwise it waits for the
// end, sending keepalive newlines. It reports whether the EOF form was used.
func (w *writer) sendSnapshot(ctx context.Context, sn *replbuf.Snapshot, rd *replbuf.Cursor) (eof bool, err error) {
	capaEOF := w.r.hs.CapaEOF
	if sn.State() == replbuf.SnapshotBuilding && !capaEOF {
		t := time.NewTicker(keepaliveInterval)
		defer t.Stop()
		for sn.State() == replbuf.SnapshotBuilding {
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-t.C:
				if err := w.write([]byte("\n")); err != nil {
					return false, err
				}
			}
		}
	}
	w.payloadStart(ctx)
	defer w.payloadEnd()
	var mark string
	switch st := sn.State(); {
	case st == replbuf.SnapshotComplete:
		err = w.write([]byte("$" + strconv.FormatInt(sn.Size(), 10) + "\r\n"))
	case st == replbuf.SnapshotFailed || !capaEOF:
		// A replica without capa eof cannot parse "$EOF:": it gets no
		// payload header at all and is dropped, to sync again.
		return false, errSnapshotFailed
	default:
		eof, mark = true, replid.New()
		err = w.write([]byte("$EOF:" + mark + "\r\n"))
	}
	if err != nil {
		return false, err
	}
	for {
		n, err := w.send(rd)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return false, err
		}
		if n == 0 {
			if err := rd.Wait(ctx); err != nil {
				return false, err
			}
		}
	}
	if eof {
		if err := w.write([]byte(mark)); err != nil {
			return false, err
		}
	}
	return eof, nil
}

// sendFile sends a snapshot spilled to disk as "$<size>" and the file.
// (*net.TCPConn).ReadFrom sends an *os.File under a LimitReader with
// sendfile(2): the bytes go from the page cache to the socket. Chunks give
// each its own write deadline. A downstream proxy's payload under a rate
// limit goes through its pacer's buffer instead (pacer.ReadFrom), since
// sendfile's bytes cannot be paced; unlimited, by sendfile still, the
// limit looked at again for each chunk.
func (w *writer) sendFile(ctx context.Context, f *os.File, size int64) error {
	w.payloadStart(ctx)
	defer w.payloadEnd()
	if err := w.write([]byte("$" + strconv.FormatInt(size, 10) + "\r\n")); err != nil {
		return err
	}
	for n := int64(0); n < size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
		k, err := io.Copy(w.conn, io.LimitReader(f, min(spillChunk, size-n)))
		n += k
		w.count(k)
		if err == nil {
			err = w.flush()
		}
		if err != nil {
			return err
		}
		if k == 0 {
			return fmt.Errorf("%s ended after %d of %d bytes", f.Name(), n, size)
		}
	}
	return nil
}
