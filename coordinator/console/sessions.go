package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"sync/atomic"
	"time"
)

// session is one login. The browser holds only its id, in an HttpOnly
// cookie; the table holds the SHA-256 of the id, so the table never holds
// a working cookie value.
type session struct {
	principal string // who logged in ("admin", or an IdP identity)
	csrf      string // synchronizer token for state-changing requests
	created   time.Time
	expires   time.Time
	ended     chan struct{} // closed when the session leaves the table: its live streams end
	denied    func() bool   // an IdP login: whether its identity has been denied since; nil for the admin token
	streams   atomic.Int32  // live event streams open (streamshare.go)
}

// sessions is the server-side session table, bounded by max: a login
// beyond it drops expired sessions first, then the oldest.
type sessions struct {
	mu   sync.Mutex
	byID map[[32]byte]*session
	max  int
	ttl  time.Duration
	now  func() time.Time
}

func newSessions(max int, ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{byID: make(map[[32]byte]*session), max: max, ttl: ttl, now: now}
}

// randomToken is 256 random bits, base64url.
func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("console: no randomness: " + err.Error()) // crypto/rand never fails on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// create starts a session for principal and returns its id; it ends after
// the table's ttl, or at until when that is sooner (zero: no bound), or
// once denied reports true (nil: never).
func (s *sessions) create(principal string, until time.Time, denied func() bool) (string, *session) {
	id := randomToken()
	now := s.now()
	sess := &session{principal: principal, csrf: randomToken(), created: now, expires: now.Add(s.ttl), ended: make(chan struct{}), denied: denied}
	if !until.IsZero() && until.Before(sess.expires) {
		sess.expires = until
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) >= s.max {
		s.pruneLocked(now)
	}
	s.byID[sha256.Sum256([]byte(id))] = sess
	return id, sess
}

// pruneLocked drops expired sessions and, if the table is still full, the
// oldest one.
func (s *sessions) pruneLocked(now time.Time) {
	var oldestKey [32]byte
	var oldest *session
	for k, sess := range s.byID {
		if !now.Before(sess.expires) {
			s.dropLocked(k)
			continue
		}
		if oldest == nil || sess.created.Before(oldest.created) {
			oldestKey, oldest = k, sess
		}
	}
	if len(s.byID) >= s.max && oldest != nil {
		s.dropLocked(oldestKey)
	}
}

// dropLocked removes the session of key and ends its live streams.
func (s *sessions) dropLocked(key [32]byte) {
	if sess := s.byID[key]; sess != nil {
		delete(s.byID, key)
		close(sess.ended)
	}
}

// get returns the live session of id, or nil. An expired one, or one
// whose identity has been denied, is dropped.
func (s *sessions) get(id string) *session {
	if id == "" || len(id) > 64 {
		return nil
	}
	key := sha256.Sum256([]byte(id))
	s.mu.Lock()
	sess := s.byID[key]
	if sess != nil && !s.now().Before(sess.expires) {
		s.dropLocked(key)
		sess = nil
	}
	s.mu.Unlock()
	if sess != nil && sess.isDenied() {
		s.end(id)
		return nil
	}
	return sess
}

// isDenied reports whether the session's identity has been denied since
// its login (asked outside the table's lock: it reads the deny-list).
func (sess *session) isDenied() bool {
	return sess.denied != nil && sess.denied()
}

// end deletes the session of id, if there is one, and ends its live
// streams.
func (s *sessions) end(id string) {
	if id == "" || len(id) > 64 {
		return
	}
	s.mu.Lock()
	s.dropLocked(sha256.Sum256([]byte(id)))
	s.mu.Unlock()
}

// len is the number of sessions in the table (expired ones included until
// pruned).
func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}
