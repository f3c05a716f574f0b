package proxy

import (
	"strings"
	"time"

	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/report"
	"github.com/replproxy/replproxy/proxy/wire"
)

// The server's figures at one moment are a report.Report, read here once
// from their sources (the configuration, the upstream link, the history, the
// registry, the stats, the stream log, the memory report) and rendered by
// package report twice: as INFO's text (Server.Info) and as the monitoring
// server's metrics.Figures (Server.figures). Reading one takes each
// source's own lock in turn, never two at once.

// reportParts names the parts of a report that cost more than loads of
// atomics and a lock or two, so that an INFO section that does not show
// them does not read them.
type reportParts uint8

const (
	reportMemory reportParts = 1 << iota // the memory report (walks the replicas and snapshots)
	reportDisk                           // the stream log's figures and the snapshot on disk

	reportAll = reportMemory | reportDisk
)

// report reads the server's figures: every part but the costly ones not in
// parts.
func (s *Server) report(parts reportParts) *report.Report {
	now := time.Now()
	r := &report.Report{
		Now: now, Config: s.config(), Up: s.up.Status(), ID: s.hist.Identity(), Stats: s.stats.Read(),
		Process: s.process,
	}
	r.Stats.Fetches = s.snaps.Counts()
	r.Stats.Source = s.snaps.SourceCounts()

	stream := s.hist.Stream()
	r.Offset, r.Filled, r.Generation = stream.Offset(), stream.Filled(), stream.Generation()
	if r.ID.History {
		r.BacklogFirst, r.BacklogLen = stream.Backlog()
	}

	for _, rp := range s.clients.replicaList() {
		// Acked is read before the offset: an ACK arriving between the two
		// then counts as not yet acknowledged, never as an acknowledged 0.
		acked := rp.Acked()
		f := report.Replica{ID: rp.ID(), IP: rp.IP(), Port: rp.Port(), State: rp.State(), Offset: rp.AckOffset()}
		if f.State == downstream.Online {
			f.Lag = int64(now.Sub(time.Unix(0, rp.AckTime())) / time.Second)
			f.HasLag = acked
		}
		f.LagBytes = max(r.Offset-f.Offset, 0)
		d := rp.Delay(now)
		f.Unsent, f.Unacked = d.Unsent, d.Unacked
		if rp.IsProxy() {
			ls := rp.Compression()
			f.Link = &report.Link{Compression: ls.Mode, Raw: ls.Stats.Raw, Wire: ls.Stats.Wire,
				CPU: ls.Stats.CPU.Seconds(), KBps: report.KBps(ls.Stats.Wire, ls.Since, now), Throttled: rp.Throttled()}
		}
		r.Replicas = append(r.Replicas, f)
	}
	r.Clients = s.clients.count()
	ls, fetched := s.up.Compression(), s.up.FetchCompression()
	r.UpLink = report.UpstreamLink{
		Link: report.Link{Compression: ls.Mode, Raw: ls.Stats.Raw, Wire: ls.Stats.Wire,
			CPU: ls.Stats.CPU.Seconds(), KBps: report.KBps(ls.Session.Wire, ls.Since, now)},
		FetchRaw: fetched.Raw, FetchWire: fetched.Wire, FetchCPU: fetched.CPU.Seconds(),
	}

	if sn := s.Snapshot(); sn != nil {
		r.Snapshot = &report.Snapshot{
			ReplID: sn.ReplID(), Offset: sn.Offset(), Size: sn.Size(), State: sn.State().String(),
			Age: int64(now.Sub(sn.Created()) / time.Second), Memory: sn.Usage().Total,
		}
	}
	r.StreamSince = -1
	if off, ok := s.hist.HeldOffset(); ok {
		r.StreamSince = max(r.Offset-off, 0)
	}
	r.Pool = s.pool.Stats()

	if parts&reportDisk != 0 {
		r.Log = s.logReport(now)
		if sp := s.hist.SpilledSnapshot(); sp != nil {
			r.OnDisk = &report.DiskSnapshot{
				ReplID: sp.ReplID, Offset: sp.Offset, Size: sp.Size,
				Age: int64(now.Sub(sp.Created) / time.Second),
			}
		}
	}
	if parts&reportMemory != 0 {
		r.Mem = s.mem.report() // raises the peak first
		r.PeakMemory = s.mem.peak.Load()
		r.OverMaxMemory = s.mem.over.Load()
	}
	return r
}

// logReport reads the stream log's state; its window is repl-log-window as
// it applies (logBehindLimit).
func (s *Server) logReport(now time.Time) report.Log {
	d := s.durable
	cfg := s.config()
	r := report.Log{Enabled: cfg.ReplLogSize > 0, OpenErr: s.dir.logOpenErr}
	if d == nil {
		return r
	}
	r.Open, r.Live = true, !d.follow.Down()
	r.Size, r.Fsync, r.Window = cfg.ReplLogSize, string(cfg.ReplLogFsync), logBehindLimit(cfg)
	r.ReplID = d.log.Identity().ReplID
	r.Stats = d.log.Stats()
	r.SyncAge = -1
	if !r.Stats.LastSync.IsZero() {
		r.SyncAge = int64(now.Sub(r.Stats.LastSync) / time.Second)
	}
	r.Errors, r.LastErr = d.follow.Errors(), d.follow.LastError()
	lag, age := d.follow.Lag(now)
	r.LagBytes, r.LagSeconds, r.Restarts = lag, age.Seconds(), d.follow.Restarts()
	r.PartialSyncs, r.MovedToDisk = s.stats.LogPartialSyncs.Load(), s.stats.ReplicasToDisk.Load()
	r.Recovered, r.Cut = d.rec.Verified, d.rec.Cut
	return r
}

func (s *Server) cmdInfo(c *client, args [][]byte) bool {
	names := make([]string, 0, len(args)-1)
	for _, a := range args[1:] {
		names = append(names, string(a))
	}
	c.out = c.proto().AppendVerbatim(c.out, "txt", s.Info(names...)) // a bulk string in RESP2
	return false
}

// Info returns the text of INFO for the named sections: none, "default",
// "all" or "everything" mean every section. Package report writes them.
func (s *Server) Info(sections ...string) string {
	want := map[string]bool{}
	for _, sec := range sections {
		want[wire.Word(sec)] = true
	}
	all := len(want) == 0 || want["default"] || want["all"] || want["everything"]
	// One report for every section asked for, so that the sections agree
	// with each other as /metrics does with them; the costly parts only for
	// the sections that show them.
	var parts reportParts
	if all || want["memory"] {
		parts |= reportMemory
	}
	if all || want["persistence"] {
		parts |= reportDisk
	}
	r := s.report(parts)
	var b strings.Builder
	for _, sec := range report.InfoSections {
		if !all && !want[sec] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		r.WriteInfoSection(&b, sec)
	}
	return b.String()
}
