// Package report is the server's figures at one moment and their two
// renderings: INFO's text (info.go) and the monitoring server's
// metrics.Figures (figures.go).
//
// # What it owns
//
// The Report and its figures (report.go): the process, the configuration in
// force, the upstream link, the replication identity and stream, the
// replicas and the compressed links, the snapshots in memory and on disk,
// the stream log, the memory report, and Counters, the server's counters
// as plain values. A figure either rendering shows that is derived from
// others (the backlog zeroed without a history, a replica's lag, the log's
// fsync lag, input bytes with replication's) is derived once, when the
// Report is built or by a method here that both renderings call, so that
// INFO and /metrics never disagree on how.
//
// It reads none of the server's parts: package proxy builds a Report
// (Server.report), reading each part under that part's own lock, one at a
// time, and hands it here to be rendered. What only one rendering shows and
// costs a system call is read by that rendering, when it is asked for: the
// process's RSS, CPU time, executable and Go heap for INFO's memory, cpu
// and server sections, the VCS revision for replproxy_build_info.
//
// It imports the types the figures are made of (config, upstream,
// downstream, history, snapshots, eviction, replbuf, streamlog), metrics
// for the Figures it renders, and sysmem for INFO's RSS; never proxy.
//
// # Goroutines and locks
//
// None. A Report is a plain value owned by the goroutine that built it (an
// admin client's, for INFO; a scrape's, for /metrics); rendering it reads
// only it. Its Config points to a published configuration, which nothing
// changes once published.
package report
