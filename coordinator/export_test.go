package coordinator

import (
	"time"

	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/store"
)

// StoreOf exposes the coordinator's store to tests that corrupt it.
func StoreOf(c *Coordinator) store.Backend { return c.store }

// PlantUnsafeReady plants the state machine's test-only safety bug
// (group.Machine.PlantUnsafeReady) in a running coordinator: its next
// Ready that grants or fences fails the safety audit.
func PlantUnsafeReady(c *Coordinator) error {
	return c.query(func(m *group.Machine) { m.PlantUnsafeReady() })
}

// WithBackend makes the coordinator serve from b instead of opening its
// store (tests that fail some of its writes); the coordinator closes it.
func WithBackend(b store.Backend) Option {
	return func(o *options) { o.backend = b }
}

// WithClock makes the coordinator read the time from now.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// CachedClaims is what the coordinator's verified-token cache holds for
// token now (grants.go mintedCache), if anything.
func CachedClaims(c *Coordinator, token string) (*ocap.Claims, bool) {
	return c.tokens.Get([]byte(token), c.now())
}

// VerifyUncached verifies token as a capability with the coordinator's
// keys, past its cache.
func VerifyUncached(c *Coordinator, token string) (*ocap.Claims, error) {
	return c.keys.verifier.Verify(token, ocap.KindCapability, c.now())
}
