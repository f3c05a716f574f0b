package metrics

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/netip"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Realm is the realm a 401 reply names in WWW-Authenticate.
const Realm = "replproxy"

// maxCachedLogins bounds how many credentials that passed are remembered.
// A scraper or two and an operator need a few; past the bound the memory
// is cleared and each pays one more bcrypt. Only credentials that passed
// are remembered, so wrong ones, however many and however different,
// never reach the bound.
const maxCachedLogins = 64

// The queue for the comparison: what checks of credentials not remembered
// (wrong passwords, unknown users, a scraper's first scrape) may hold.
// Each holds a monitoring connection, one of MaxConns slots, while it
// waits, and the listener does not reclaim a slot with a request in
// progress; so without a bound, a flood of wrong passwords holds every
// slot, and /healthz and remembered scrapers wait in the kernel's accept
// queue behind the flood, one comparison per connection ahead of them.
const (
	// maxQueued bounds the checks admitted to the comparison, the one
	// running included: half of MaxConns, so that the other half serves
	// /healthz and remembered scrapers whatever the flood. A check past
	// it is refused at once (429), which frees its slot. It also bounds
	// how long an admitted check waits: maxQueued comparisons, about
	// 0.2 s at cost 10.
	maxQueued = MaxConns / 2
	// maxQueuedPerSource bounds the admitted checks of one client address
	// (of one /64 for IPv6), so that one source's flood leaves room for
	// another's first scrape (a second Prometheus, a kubelet's readiness
	// probe).
	maxQueuedPerSource = 2
)

// A Verdict is what a check makes of a request's credentials.
type Verdict int

const (
	// Failed: an unknown user, or a wrong password.
	Failed Verdict = iota
	// Passed: the password is the user's.
	Passed
	// Busy: not compared, because as many checks as may wait for the
	// comparison are waiting (or as many of the same source). The client
	// may ask again later.
	Busy
)

func (v Verdict) String() string {
	switch v {
	case Failed:
		return "failed"
	case Passed:
		return "passed"
	case Busy:
		return "busy"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// BasicAuth checks HTTP basic authentication against bcrypt hashes, as
// Prometheus's exporters do (exporter-toolkit's basic_auth_users).
//
// A bcrypt comparison costs tens of milliseconds of a CPU at cost 10 (and
// doubles with each step of cost), so it is bounded: comparisons run one
// at a time, whoever asks, so that wrong passwords take at most one CPU;
// credentials that passed are remembered (under an HMAC with a key of the
// process, never as they are), so that a scraper asking every few seconds
// pays one comparison, not one per scrape, and never waits behind a
// stranger's; and at most maxQueued checks wait for the comparison, at
// most maxQueuedPerSource of one source, the others being told Busy at
// once (see maxQueued for why). An unknown user is compared with a hash of
// the highest cost configured, so that the time a refusal takes does not
// tell which users exist. bcrypt compares in constant time.
type BasicAuth struct {
	users map[string][]byte // user name to bcrypt hash; read-only
	cost  int               // the highest cost among users'
	key   [32]byte          // the HMAC key of remembered credentials

	// compare is bcrypt.CompareHashAndPassword (tests count the calls).
	compare func(hash, password []byte) error

	queue compareQueue // the checks admitted to compare

	compareMu sync.Mutex // one bcrypt at a time; guards dummy
	dummy     []byte     // a hash of cost, made at the first unknown user

	mu     sync.Mutex
	passed map[[sha256.Size]byte]struct{} // HMACs of credentials that passed
}

// NewBasicAuth returns the check of users (user name to bcrypt hash). It
// fails on a hash bcrypt cannot read, naming the user, not the hash.
func NewBasicAuth(users map[string]string) (*BasicAuth, error) {
	a := &BasicAuth{
		users:   make(map[string][]byte, len(users)),
		compare: bcrypt.CompareHashAndPassword,
		passed:  make(map[[sha256.Size]byte]struct{}),
	}
	a.queue.sources = make(map[string]int, maxQueued)
	for u, h := range users {
		cost, err := bcrypt.Cost([]byte(h))
		if err != nil {
			return nil, fmt.Errorf("user %q: not a bcrypt hash", u)
		}
		a.users[u] = []byte(h)
		a.cost = max(a.cost, cost)
	}
	if _, err := rand.Read(a.key[:]); err != nil {
		return nil, err
	}
	return a, nil
}

// Check says whether the password is user's, for a request from source
// (the client's address, as http.Request.RemoteAddr has it): Passed at
// once when these credentials passed before, else after a bcrypt
// comparison, or Busy without one when the comparison's queue is full.
func (a *BasicAuth) Check(source, user, password string) Verdict {
	mac := a.mac(user, password)
	a.mu.Lock()
	_, ok := a.passed[mac]
	a.mu.Unlock()
	if ok {
		return Passed
	}
	source = sourceOf(source)
	if !a.queue.enter(source) {
		return Busy
	}
	defer a.queue.leave(source)
	hash, known := a.users[user]
	a.compareMu.Lock()
	if !known {
		hash = a.dummyLocked()
	}
	err := a.compare(hash, []byte(password))
	a.compareMu.Unlock()
	if !known || err != nil {
		return Failed
	}
	a.mu.Lock()
	if len(a.passed) >= maxCachedLogins {
		clear(a.passed)
	}
	a.passed[mac] = struct{}{}
	a.mu.Unlock()
	return Passed
}

// dummyLocked returns the hash an unknown user's password is compared
// with: of a random password no one knows, at the highest cost configured.
// REQUIRES: compareMu held.
func (a *BasicAuth) dummyLocked() []byte {
	if a.dummy == nil {
		var pw [16]byte
		rand.Read(pw[:])
		// It fails only on a cost Cost has refused already.
		a.dummy, _ = bcrypt.GenerateFromPassword(pw[:], max(a.cost, bcrypt.MinCost))
	}
	return a.dummy
}

// mac is the HMAC of user and password under the process's key: what is
// remembered of credentials that passed.
func (a *BasicAuth) mac(user, password string) [sha256.Size]byte {
	h := hmac.New(sha256.New, a.key[:])
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(user)))
	h.Write(n[:])
	h.Write([]byte(user))
	h.Write([]byte(password))
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// A compareQueue admits checks to the comparison: at most maxQueued at a
// time, at most maxQueuedPerSource of one source. Its mutex is a leaf,
// held only to count.
type compareQueue struct {
	mu      sync.Mutex
	queued  int            // guarded by mu: checks admitted, comparing or waiting to
	sources map[string]int // guarded by mu: of those, per source; no entry for none
}

// enter admits a check of source, and reports whether it did.
func (q *compareQueue) enter(source string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued >= maxQueued || q.sources[source] >= maxQueuedPerSource {
		return false
	}
	q.queued++
	q.sources[source]++
	return true
}

// leave ends an admitted check of source.
func (q *compareQueue) leave(source string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queued--
	if q.sources[source]--; q.sources[source] == 0 {
		delete(q.sources, source)
	}
}

// sourceOf is what the per-source bound counts a client by: its IP
// address, or for IPv6 its /64, which one host commonly has whole; remote
// itself when it is no address.
func sourceOf(remote string) string {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return remote
	}
	addr := ap.Addr().Unmap()
	if addr.Is6() {
		p, _ := addr.WithZone("").Prefix(64) // cannot fail: an IPv6 address and 64
		return p.String()
	}
	return addr.String()
}

// unauthorized writes the 401 reply that asks for basic authentication.
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="`+Realm+`"`)
	http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
}

// retryAfter is the Retry-After of a 429 reply, in seconds: the least the
// header can say, and more than a full queue takes to drain at cost 10
// (maxQueued comparisons, about 0.2 s).
const retryAfter = "1"

// tooManyRequests writes the 429 reply to a request whose credentials were
// not checked because the comparison's queue was full. 429 is what
// exporter-toolkit answers past its rate_limit; Retry-After (RFC 6585)
// tells a client that honours it when to ask again.
func tooManyRequests(w http.ResponseWriter) {
	w.Header().Set("Retry-After", retryAfter)
	http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
}
