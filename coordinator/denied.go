package coordinator

import (
	"errors"
	"sync"
	"time"

	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/store"
)

// errDenied: the token (or an ancestor it was attenuated from) was denied
// through POST /v1/admin/capabilities/{jti}/revoke.
var errDenied = errors.New("token denied by an administrator")

// deniedSet is the coordinator's own copy of the deny-list, so the tokens
// it accepts itself — client credentials at join, member tokens,
// capabilities presented to commit or attenuate — are refused like the
// gateways refuse denied capabilities. Filled from the store at start and
// by every successful deny; an entry lapses at its exp. Safe for
// concurrent use.
type deniedSet struct {
	mu  sync.RWMutex
	exp map[string]int64 // jti → unix seconds
}

func newDeniedSet(stored []store.Denied) *deniedSet {
	d := &deniedSet{exp: make(map[string]int64, len(stored))}
	for _, e := range stored {
		d.exp[e.JTI] = e.Exp
	}
	return d
}

func (d *deniedSet) add(jti string, exp int64) {
	d.mu.Lock()
	if exp > d.exp[jti] {
		d.exp[jti] = exp
	}
	d.mu.Unlock()
}

// denies reports whether c or any of its ancestors is denied at now;
// lapsed entries are dropped on the way.
func (d *deniedSet) denies(c *ocap.Claims, now time.Time) bool {
	d.mu.RLock()
	empty := len(d.exp) == 0
	d.mu.RUnlock()
	if empty {
		return false
	}
	for _, jti := range append([]string{c.ID}, c.Chain...) {
		if d.check(jti, now.Unix()) {
			return true
		}
	}
	return false
}

func (d *deniedSet) check(jti string, now int64) bool {
	d.mu.RLock()
	exp, ok := d.exp[jti]
	d.mu.RUnlock()
	if ok && now > exp {
		d.mu.Lock()
		if d.exp[jti] == exp {
			delete(d.exp, jti)
		}
		d.mu.Unlock()
		return false
	}
	return ok
}
