package downstream

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// fakeLink is the upstream link as Accept asks it.
type fakeLink struct{ up bool }

func (l fakeLink) Connected() bool { return l.up }

// planningSnapshots is the snapshot work with a full plan to give: it
// counts what it was asked.
type planningSnapshots struct {
	*fakeHost
	full, backup atomic.Int64
	plan         history.Plan
	err          error
}

func (p *planningSnapshots) PlanFull() (history.Plan, error) {
	p.full.Add(1)
	return p.plan, p.err
}

func (p *planningSnapshots) PlanBackup(int64) (history.Plan, error) {
	p.backup.Add(1)
	return p.plan, p.err
}

// TestAccept: what a PSYNC or SYNC gets from Accept, and what it counts.
// A partial resync is served with the link down; a full sync with the link
// down is refused with Redis's NOMASTERLINK, and so is a filtered replica
// without EOF capability; a full sync is planned by the snapshot work (a
// backup by PlanBackup), its refusal passed on as an ERR; each accepted
// sync is counted as Redis counts it (sync_partial_err for a PSYNC that
// named a history and got a full sync, none for SYNC or PSYNC ? -1).
func TestAccept(t *testing.T) {
	e := newTestEnv(t)
	sn := replbuf.NewSnapshot(replid.New(), 0, replbuf.NewPool(0), time.Now())
	sn.Append(redistest.RDBWith([]byte("v")))
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	e.hist.Install(sn)
	id := e.hist.Identity().ReplID
	e.hist.Stream().Append([]byte("hello"))

	for _, tc := range []struct {
		name    string
		req     SyncRequest
		hs      Handshake
		up      bool
		planErr error
		refused string
		partial bool
		full    int64 // PlanFull calls
		backup  int64 // PlanBackup calls
		// counters: sync_full, sync_partial_ok, sync_partial_err, and the
		// reason's full syncs
		syncFull, partialOK, partialErr int64
		reason                          history.FullSyncReason
	}{
		{name: "partial, link down", req: SyncRequest{ReplID: id, Offset: 3}, partial: true, partialOK: 1},
		{name: "partial, link up", req: SyncRequest{ReplID: id, Offset: 6}, up: true, partial: true, partialOK: 1},
		{name: "full, link down", req: SyncRequest{ReplID: "?", Offset: -1}, refused: NoMasterLink},
		{name: "full asked", req: SyncRequest{ReplID: "?", Offset: -1}, up: true, full: 1, syncFull: 1, reason: history.FullSyncRequested},
		{name: "SYNC", req: SyncRequest{ReplID: "?", Offset: -1, Legacy: true}, up: true, full: 1, syncFull: 1, reason: history.FullSyncRequested},
		{name: "out of range", req: SyncRequest{ReplID: id, Offset: 1 << 40}, up: true, full: 1, syncFull: 1, partialErr: 1,
			reason: history.FullSyncOffsetOutOfRange},
		{name: "other replid", req: SyncRequest{ReplID: replid.New(), Offset: 3}, up: true, full: 1, syncFull: 1, partialErr: 1,
			reason: history.FullSyncReplIDMismatch},
		{name: "backup", req: SyncRequest{ReplID: "?", Offset: -1}, hs: Handshake{RDBOnly: true}, up: true, backup: 1, syncFull: 1,
			reason: history.FullSyncRequested},
		{name: "peer proxy's seed", req: SyncRequest{ReplID: "?", Offset: -1}, hs: Handshake{RDBOnly: true, CapaSource: true}, up: true,
			full: 1, syncFull: 1, reason: history.FullSyncRequested},
		{name: "plan refused", req: SyncRequest{ReplID: "?", Offset: -1}, up: true, planErr: errors.New("replproxy is shutting down"),
			refused: "ERR replproxy is shutting down", full: 1},
		{name: "filtered without EOF, link down", req: SyncRequest{ReplID: "?", Offset: -1}, hs: Handshake{Filtered: true},
			refused: NoMasterLink},
		{name: "filtered without EOF", req: SyncRequest{ReplID: "?", Offset: -1}, hs: Handshake{Filtered: true}, up: true,
			refused: "ERR Filtered replica requires EOF capability"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snaps := &planningSnapshots{fakeHost: e.host, plan: history.Plan{ReplID: id, Offset: 0, Epoch: 1}, err: tc.planErr}
			var full, ok, perr, fromLog atomic.Int64
			var byReason history.FullSyncCounts
			conn, peer := net.Pipe()
			defer conn.Close()
			defer peer.Close()
			r, refused := Accept(Config{ID: 1, Conn: conn, Reader: wire.NewCommandReader(conn, wire.Limits{}), Addr: "127.0.0.1:1",
				Handshake: tc.hs, Hist: e.hist, Host: e.host, Snapshots: snaps, Link: fakeLink{tc.up}, Settings: e.host.settings(),
				Log: hclog.NewNullLogger(), Counters: Counters{Syncs: SyncCounters{Full: &full, PartialOK: &ok, PartialErr: &perr,
					FromLog: &fromLog, ByReason: &byReason}}}, tc.req)
			if refused != tc.refused {
				t.Fatalf("refused %q, want %q", refused, tc.refused)
			}
			if (r == nil) != (tc.refused != "") {
				t.Fatalf("replica %v with refusal %q", r, refused)
			}
			if r != nil {
				if got := r.State() == Online; got != tc.partial {
					t.Errorf("online at once %v, want %v (a partial resync)", got, tc.partial)
				}
				if r.plan.Partial {
					r.plan.Cursor.Close()
				}
			}
			if got := snaps.full.Load(); got != tc.full {
				t.Errorf("PlanFull asked %d times, want %d", got, tc.full)
			}
			if got := snaps.backup.Load(); got != tc.backup {
				t.Errorf("PlanBackup asked %d times, want %d", got, tc.backup)
			}
			if full.Load() != tc.syncFull || ok.Load() != tc.partialOK || perr.Load() != tc.partialErr || fromLog.Load() != 0 {
				t.Errorf("sync_full %d, sync_partial_ok %d, sync_partial_err %d, from log %d; want %d, %d, %d, 0",
					full.Load(), ok.Load(), perr.Load(), fromLog.Load(), tc.syncFull, tc.partialOK, tc.partialErr)
			}
			for reason := range byReason {
				want := int64(0)
				if tc.syncFull > 0 && history.FullSyncReason(reason) == tc.reason {
					want = 1
				}
				if got := byReason[reason].Load(); got != want {
					t.Errorf("full syncs for %s: %d, want %d", history.FullSyncReason(reason), got, want)
				}
			}
		})
	}
}
