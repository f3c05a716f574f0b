package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/replproxy/replproxy/replid"
)

// A Seed is a snapshot the snapshot source (snapshot-from: a replica of the
// same primary, or a peer proxy) is sending over a side link, for a main
// link whose history the primary cannot continue: the proxy's first sync,
// or one after its history was lost or cut. Its +FULLRESYNC named where the
// source stands in the primary's stream; the main link asks the primary to
// continue from there (PSYNC <replid> <offset+1>) while the payload still
// arrives, so that the primary's backlog needs to cover only the source's
// lag, never the transfer, and the primary does not fork.
type Seed interface {
	// Position is the replid and offset the source's +FULLRESYNC named.
	Position() (replID string, offset int64)
	// Begin is told that the primary continues the position (+CONTINUE):
	// the history starts a new generation of the stream at the offset,
	// under the replid, the replicas of the generation it replaces are
	// disconnected, and those that need a full sync wait for the payload,
	// which goes on arriving over the side link. On the link's goroutine,
	// before the first stream byte.
	Begin()
	// Abort is told that the primary cannot continue the position: why is
	// a *replid.NotContinued, or the primary's own answer (ErrPrimaryFullSync)
	// or the link's failure. The payload is refused. It reports whether to
	// ask the primary for a full sync instead (snapshot-from-fallback
	// yes); after ErrPrimaryFullSync the primary has forked already and its
	// payload is read whatever it reports.
	Abort(why error) (fallback bool)
}

// ErrPrimaryFullSync is the primary's +FULLRESYNC to a PSYNC that
// continued a seed's position: it forked all the same (its INFO said the
// position was continuable, or it did not tell), so its payload is read.
// Counted as a source behind the primary's backlog, the likeliest cause.
var ErrPrimaryFullSync = &replid.NotContinued{Reason: "behind", Forked: true,
	Detail: "the primary answered the snapshot source's position with a full sync"}

// ErrSourceWait ends a main link's attempt whose snapshot source could not
// be used under snapshot-from-fallback no: the link tries again with
// backoff, and says so at debug level only, the snapshot work having
// logged the cause once.
var ErrSourceWait = errors.New("waiting for the snapshot source")

// primaryHistory is what a server's INFO replication says of where it
// stands (a snapshot source) and of the positions it continues by partial
// resync (the primary).
type primaryHistory struct {
	replID, replID2 string
	offset          int64 // master_repl_offset
	secondOffset    int64 // second_repl_offset: replID2 continues up to here
	backlog         bool  // repl_backlog_active
	first, histlen  int64 // repl_backlog_first_byte_offset, repl_backlog_histlen
}

// continues applies the primary's rule for PSYNC replID next (Redis's
// primaryTryPartialResynchronization) as far as its INFO can tell: nil
// when it would answer +CONTINUE. A position past the end the INFO shows
// passes: the INFO is older than the position (the source was asked
// after the primary, and the primary's stream only grows), and the
// PSYNC's own answer judges it.
func (p *primaryHistory) continues(replID string, next int64) error {
	if replID != p.replID && (replID != p.replID2 || next > p.secondOffset) {
		return &replid.NotContinued{Reason: "replid", Detail: fmt.Sprintf(
			"replid %s at offset %d is not in the primary's history (replid %s, replid2 %s up to %d)",
			replID, next-1, p.replID, p.replID2, p.secondOffset)}
	}
	if !p.backlog || next < p.first {
		return &replid.NotContinued{Reason: "behind", Detail: fmt.Sprintf(
			"offset %d is not in the primary's backlog (offsets %d to %d)", next-1, p.first, p.first+p.histlen-1)}
	}
	return nil
}

// reached reports, as a *replid.NotContinued with reason "ahead", a position
// under the primary's replid past the end its INFO showed: one the primary
// has not reached. Only an INFO read after the position was named can say
// so (a source's stream trails the primary's, never leads it).
func (p *primaryHistory) reached(replID string, offset int64) error {
	if replID == p.replID && offset > p.offset {
		return &replid.NotContinued{Reason: "ahead", Detail: fmt.Sprintf(
			"offset %d is past the primary's end (%d): not of its history", offset, p.offset)}
	}
	return nil
}

// infoReplyMax bounds the INFO replication reply read from a primary: a
// few hundred bytes per replica line, for thousands of replicas.
const infoReplyMax = 1 << 20

// askHistory asks the server, before PSYNC, where it stands and which
// positions it continues (INFO replication). It returns nil, nil when it
// does not tell (an ACL user limited to replication, an error reply): the
// PSYNC's answer is then the only check.
func (c *session) askHistory() (*primaryHistory, error) {
	if err := c.send("INFO", "replication"); err != nil {
		return nil, err
	}
	line, err := c.readLine()
	if err != nil {
		return nil, fmt.Errorf("INFO replication: %w", err)
	}
	if line[0] == '-' {
		lg := c.l.log.With("primary", c.primary)
		if c.toSource {
			lg = c.l.log.With("source", c.primary)
		}
		lg.Debug("no replication info shown, PSYNC's answer is the only check", "reply", clip(line, 120))
		return nil, nil
	}
	n, ok := replid.ParseDecimal(strings.TrimPrefix(line, "$"), infoReplyMax)
	if line[0] != '$' || !ok {
		return nil, fmt.Errorf("INFO replication: %w: %q", ErrBadReply, clip(line, 80))
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(c.rd.Reader(), body); err != nil {
		return nil, fmt.Errorf("INFO replication: %w", err)
	}
	return parsePrimaryHistory(string(body[:n]))
}

// parsePrimaryHistory reads the fields of INFO replication that say which
// positions a primary continues. Every one must be there and valid.
func parsePrimaryHistory(info string) (*primaryHistory, error) {
	f := make(map[string]string)
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSuffix(line, "\r"), ":"); ok {
			f[k] = v
		}
	}
	p := &primaryHistory{replID: f["master_replid"], replID2: f["master_replid2"], backlog: f["repl_backlog_active"] == "1"}
	if !replid.Valid(p.replID) || !replid.Valid(p.replID2) {
		return nil, fmt.Errorf("INFO replication: %w: master_replid %q, master_replid2 %q",
			ErrBadReply, clip(p.replID, 60), clip(p.replID2, 60))
	}
	for _, x := range []struct {
		name string
		to   *int64
	}{{"master_repl_offset", &p.offset}, {"second_repl_offset", &p.secondOffset}, {"repl_backlog_first_byte_offset", &p.first}, {"repl_backlog_histlen", &p.histlen}} {
		v, err := strconv.ParseInt(f[x.name], 10, 64)
		if err != nil || v < -1 || v > replid.MaxOffset {
			return nil, fmt.Errorf("INFO replication: %w: %s %q", ErrBadReply, x.name, clip(f[x.name], 40))
		}
		*x.to = v
	}
	return p, nil
}

// seedSync syncs the main link from the snapshot source rather than by a
// full sync of the primary's (PROTOCOL §4.2 on the primary's side): the
// source's +FULLRESYNC names a position, which the primary is asked to
// continue at once, while the payload still arrives over the side link.
// ph is what the primary's INFO said (nil: it did not tell). A source that
// fails, or a position the primary cannot continue, is counted by the
// snapshot work (Snapshots); under snapshot-from-fallback yes the primary
// is then asked for a full sync as without a source, under no the attempt
// fails and the link retries with backoff.
func (c *session) seedSync(ctx context.Context, ph *primaryHistory) error {
	l := c.l
	var check func(string, int64) error
	if ph != nil {
		check = func(replID string, offset int64) error { return ph.continues(replID, offset+1) }
	}
	seed, fallback, err := l.snaps.Seed(ctx, check)
	c.conn.SetDeadline(time.Now().Add(c.timeout)) // the wait is not the primary's silence
	if err != nil {
		if !fallback {
			return fmt.Errorf("%w: %w", ErrSourceWait, err)
		}
		l.log.Warn("snapshot source failed, asking the primary for a full sync", "error", err)
		return c.psyncAsk("?", "-1", nil)
	}
	if seed == nil { // snapshot-from was just set back to primary
		return c.psyncAsk("?", "-1", nil)
	}
	replID, offset := seed.Position()
	if ph != nil && replID == ph.replID && offset > ph.offset {
		// The primary's INFO was read before the source named its position,
		// which may be newer: ask again. A position still past the primary's
		// end is not of its history (a source that lies, or one that went on
		// from an old primary after a failover), and a PSYNC for it would be
		// answered with a full sync: a fork.
		fresh, err := c.askHistory()
		if err != nil {
			seed.Abort(err)
			return err
		}
		if fresh != nil {
			ph = fresh
		}
	}
	if ph != nil {
		err := ph.continues(replID, offset+1)
		if err == nil {
			err = ph.reached(replID, offset)
		}
		if err != nil {
			if !seed.Abort(err) {
				return fmt.Errorf("%w: %w", ErrSourceWait, err)
			}
			l.log.Warn("the primary cannot continue the snapshot source, asking it for a full sync", "error", err)
			return c.psyncAsk("?", "-1", nil)
		}
	}
	return c.psyncAsk(replID, strconv.FormatInt(offset+1, 10), seed)
}
