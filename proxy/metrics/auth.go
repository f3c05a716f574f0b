package metrics

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Realm is the realm a 401 reply names in WWW-Authenticate.
const Realm = "replproxy"

// maxCachedLogins bounds how many credentials that passed are remembered.
// A scraper or two and an operator need a few; past the bound the memory
// is cleared and each pays one more bcrypt.
const maxCachedLogins = 64

// BasicAuth checks HTTP basic authentication against bcrypt hashes, as
// Prometheus's exporters do (exporter-toolkit's basic_auth_users).
//
// A bcrypt comparison costs tens of milliseconds of a CPU at cost 10 (and
// doubles with each step of cost), so it is bounded: comparisons run one
// at a time, whoever asks, and credentials that passed are remembered
// (under an HMAC with a key of the process, never as they are), so that a
// scraper asking every few seconds pays one comparison, not one per scrape.
// A stranger sending wrong passwords thus holds at most one CPU, and never
// delays a scraper whose credentials are remembered. An unknown user is
// compared with a hash of the highest cost configured, so that the time a
// refusal takes does not tell which users exist. bcrypt compares in
// constant time.
type BasicAuth struct {
	users map[string][]byte // user name to bcrypt hash; read-only
	cost  int               // the highest cost among users'
	key   [32]byte          // the HMAC key of remembered credentials

	compareMu sync.Mutex // one bcrypt at a time; guards dummy
	dummy     []byte     // a hash of cost, made at the first unknown user

	mu     sync.Mutex
	passed map[[sha256.Size]byte]struct{} // HMACs of credentials that passed
}

// NewBasicAuth returns the check of users (user name to bcrypt hash). It
// fails on a hash bcrypt cannot read, naming the user, not the hash.
func NewBasicAuth(users map[string]string) (*BasicAuth, error) {
	a := &BasicAuth{users: make(map[string][]byte, len(users)), passed: make(map[[sha256.Size]byte]struct{})}
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

// Check reports whether the password is user's.
func (a *BasicAuth) Check(user, password string) bool {
	mac := a.mac(user, password)
	a.mu.Lock()
	_, ok := a.passed[mac]
	a.mu.Unlock()
	if ok {
		return true
	}
	hash, known := a.users[user]
	a.compareMu.Lock()
	if !known {
		hash = a.dummyLocked()
	}
	err := bcrypt.CompareHashAndPassword(hash, []byte(password))
	a.compareMu.Unlock()
	if !known || err != nil {
		return false
	}
	a.mu.Lock()
	if len(a.passed) >= maxCachedLogins {
		clear(a.passed)
	}
	a.passed[mac] = struct{}{}
	a.mu.Unlock()
	return true
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

// unauthorized writes the 401 reply that asks for basic authentication.
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="`+Realm+`"`)
	http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
}
