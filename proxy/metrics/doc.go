// Package metrics is replproxy's monitoring HTTP server (metrics-port,
// metrics-bind): /metrics in Prometheus's text format, /healthz and /readyz.
//
// # What it owns
//
// The listener, bounded to MaxConns connections at a time (limitListener:
// connections past the cap wait in the kernel's accept queue, holding no
// descriptor of the process; at the cap a slot is held by a request in
// progress, not by a connection, so that a probe gets in whatever the other
// clients do), the http.Server with its timeouts, and the list of replproxy_
// metrics with their names, help, labels and the figures each renders
// (metricSpecs, in collector.go; Figures in figures.go), named by
// Prometheus's rules (units, _total on counters, labels that add up;
// docs/metrics.md's table lists them, and a test keeps it complete). A replica's series
// are labelled by its stable identity (replica_ip, replica_port), so that a
// reconnect continues them. It owns no figure: at each scrape it calls its
// owner's Figures function once and renders the Figures value it returns,
// deriving nothing, so that each series is what INFO shows for the same
// figure (proxy builds both from one report). Besides its own, /metrics
// carries the Go runtime's and the process's collectors, from a registry of
// the server's own (no global registry). /readyz answers with its owner's
// Ready function.
//
// # Securing it
//
// Its owner may set TLS (Serve wraps the listener: the cap still counts
// the connections under it, through connState) and Auth, a BasicAuth over
// bcrypt hashes (auth.go): every path but /healthz then answers 401 with
// WWW-Authenticate: Basic realm="replproxy" to a request without
// credentials that pass, and AuthFailed hears of it. Headers are added to
// every reply. Where the TLS config and the users come from (metrics-tls,
// metrics-web-config) is the owner's business.
//
// A check of credentials not remembered costs a bcrypt comparison, and
// holds its connection's slot while it waits for one; so a flood of wrong
// passwords is bounded where it would otherwise fill the cap: comparisons
// run one at a time (one CPU at most), at most half of MaxConns checks
// wait for them (maxQueued, two of one source), and a check past that is
// refused 429 with Retry-After at once, without a comparison, which
// AuthBusy hears of. The other half of the slots keep turning, so /healthz
// and a scraper whose credentials passed before (remembered, never
// compared again) wait only for their turn in the accept queue, behind
// connections each refused in a fraction of a millisecond.
//
// It imports nothing of replproxy's: a figure it should show is a field of
// Figures and a line of metricSpecs.
//
// # Goroutines
//
// Serve runs on its caller's goroutine (the proxy's Run starts one) until
// Shutdown; net/http serves each connection on a goroutine of its own, and
// each scrape calls Figures and Ready there, concurrently with others.
// Shutdown waits up to ShutdownWait for scrapes in progress.
//
// # Locks
//
// BasicAuth has three leaves, none held while another is taken: the
// queue's (counting the checks admitted), the one that runs bcrypt
// comparisons one at a time, and the one that guards the credentials that
// passed.
//
// The listener's mutex is a leaf too: it guards the connections holding
// slots and whether each has a request in progress (connState, from
// net/http's goroutines), and nothing under it blocks or does I/O: a
// reclaimed connection is closed once it is released. A scrape holds
// nothing while it calls Figures or Ready, so the locks those take (the
// proxy's, each alone) have no place in an order with this package;
// nothing is called back under a lock here.
//
// # Example
//
//	ln, err := net.Listen("tcp", "127.0.0.1:9379")
//	if err != nil { ... }
//	m := &metrics.Server{Figures: figures, Ready: ready}
//	m.Attach(ln)
//	go m.Serve()
//	...
//	m.Shutdown()
package metrics
