package gateway

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/gateway/guard"
	"github.com/capgate/capgate/ocap"
)

// errFenced is the cancel cause of a fetch a revocation superseded.
var errFenced = errors.New("gateway: capability revoked while the fetch was in flight")

// errClientGone is the cancel cause of a long poll whose client closed its
// connection, or only its side of it (answered as if max_wait had passed:
// fetchCall.hungUp).
var errClientGone = errors.New("gateway: the client went away during the long poll")

// fetchEntry is one fetch between admission and its last byte encoded:
// its place in the registry, its holder, the context its broker call runs
// under (cancel ends it) and a done signal.
//
// One allocation per fetch: the registry's entry is part of it, and done
// is made only for a fetch a revocation waits for.
type fetchEntry struct {
	entry  guard.Entry[*fetchEntry]
	holder string
	tenant tenantKey
	// byHolder, byTenant are its holder's and tenant's counts in
	// inflight's maps, so finish need not look them up.
	byHolder, byTenant *int
	ctx                fetchCtx
	stop               func() bool // unlinks ctx from a base context, if any
	// done is made by revoke (under inflight.mu, while the fetch is still
	// registered) when it waits for the fetch, and closed by finish;
	// nil for a fetch nobody waits for.
	done chan struct{}
}

// cancel cancels the fetch's broker call with cause.
func (e *fetchEntry) cancel(cause error) { e.ctx.cancel(cause) }

// inflight is the registry of fetches in flight (guard.Registry decides
// which a revocation refuses) behind a mutex, with what only a process
// has: contexts to cancel and the wait for each cancelled fetch to finish.
// It also bounds them: max in all, maxPerTenant per tenant (tenantOf),
// maxPerHolder per holder (holderOf).
type inflight struct {
	max, maxPerHolder, maxPerTenant int

	mu  sync.Mutex
	reg *guard.Registry[*fetchEntry]
	// byHolder and byTenant count the fetches in flight per holder and
	// per tenant. A count that drops to 0 stays in its map (one at a
	// time, deleting it would cost two more map operations and an
	// allocation per fetch) until the map grows past sweepAt and sweep
	// removes the zeros: at most ~2× the holders and tenants with
	// fetches in flight, and at least minSweep, are ever kept.
	byHolder map[string]*int
	byTenant map[tenantKey]*int
	sweepAt  int
	closed   error // set by shutdown: every later fetch starts cancelled

	cancelled atomic.Int64 // fetches cancelled by revocations, ever
	// refused counts start's refusals by cap, ever (the metric
	// capgate_gateway_inflight_refused_total{cap}).
	refused [hitHolder + 1]atomic.Int64
}

// capHit is the in-flight cap start refused a fetch at, if any.
type capHit uint8

const (
	hitNone    capHit = iota
	hitGateway        // max: 503 overloaded
	hitTenant         // maxPerTenant: 429 too_many_fetches
	hitHolder         // maxPerHolder: 429 too_many_fetches
)

// code is the API code of a refusal at h.
func (h capHit) code() api.Code {
	switch h {
	case hitGateway:
		return api.CodeOverloaded
	case hitTenant, hitHolder:
		return api.CodeTooManyFetches
	}
	return ""
}

func newInflight(bugs guard.Bugs, max, maxPerHolder, maxPerTenant int) *inflight {
	return &inflight{reg: guard.NewRegistry[*fetchEntry](bugs), max: max, maxPerHolder: maxPerHolder, maxPerTenant: maxPerTenant,
		byHolder: map[string]*int{}, byTenant: map[tenantKey]*int{}, sweepAt: minSweep}
}

// minSweep is the least number of holders plus tenants inflight keeps
// counts of (zeros included) before it sweeps the zeros (inflight).
const minSweep = 1024

// tenantKey is whom a capability's fetches count against as a tenant:
// its tnt claim (the member's OAuth client, IdP identity or client
// credential, set by the coordinator on every capability a join or
// heartbeat grants and kept by attenuation), else its sub (an admin
// grant's holder, which an operator names; a capability minted by a
// coordinator from before tnt). A struct, not a joined string: no
// allocation per fetch.
type tenantKey struct {
	sub bool // id is a sub, not a tnt
	id  string
}

// tenantOf is c's tenant (tenantKey). A client credential's produces
// (and an IdP identity's, over the Kafka listener) count for the tenant
// the coordinator puts in its members' capabilities (tnt,
// coordinator.tenant; kafkaproto.Principal.tenant): an OAuth client's
// token for its sub "oauth:<client_id>", any other credential for its
// jti, an IdP identity for its id. Never for its sub: a credential's is
// its free --name and an IdP's a subject of one issuer, and keyed by it
// a same-named credential, or an admin grant to a holder of that name,
// used up another tenant's allowance (redteam10 #1).
func tenantOf(c *ocap.Claims) tenantKey {
	switch {
	case c.Tenant != "":
		return tenantKey{id: c.Tenant}
	case c.Kind() == ocap.KindCapability || c.ID == "":
	case c.Kind() == ocap.KindClient && strings.HasPrefix(c.Subject, oauthSubject):
		return tenantKey{id: c.Subject}
	default:
		return tenantKey{id: c.ID}
	}
	return tenantKey{sub: true, id: c.Subject}
}

// oauthSubject starts the sub of a credential the coordinator's token
// endpoint minted: "oauth:<client_id>".
const oauthSubject = "oauth:"

// holderOf is whom a capability's fetches count against: the root of its
// chain (an attenuated child and its own children share their root's
// allowance), else the capability itself.
func holderOf(c *ocap.Claims) string { return c.Root() }

// start registers a fetch and returns its entry and context, which the
// revocation paths, a client hang-up and shutdown cancel; or, with
// nothing registered, the cap it is refused at: hitGateway when max
// fetches are in flight, hitTenant when the tenant has maxPerTenant,
// hitHolder when the holder has maxPerHolder.
func (f *inflight) start(c *ocap.Claims, req authz.Request) (*fetchEntry, *fetchCtx, capHit) {
	holder, tenant := holderOf(c), tenantOf(c)
	f.mu.Lock()
	// Each count looked up once: the check's pointer is the one
	// registerLocked counts on (nil: none yet, made there).
	byTenant, byHolder := f.byTenant[tenant], f.byHolder[holder]
	hit := hitNone
	switch {
	case f.reg.Len() >= f.max:
		hit = hitGateway
	case count(byTenant) >= f.maxPerTenant:
		hit = hitTenant
	case count(byHolder) >= f.maxPerHolder:
		hit = hitHolder
	}
	if hit != hitNone {
		f.mu.Unlock()
		f.refused[hit].Add(1)
		return nil, nil, hit
	}
	e := f.registerCounted(c, req, holder, tenant, byHolder, byTenant)
	f.mu.Unlock()
	return e, &e.ctx, hitNone
}

// startUnder is start for a fetch whose context also ends with base (the
// Kafka listener's fetches that ask Kafka).
func (f *inflight) startUnder(base context.Context, c *ocap.Claims, req authz.Request) (*fetchEntry, context.Context, api.Code) {
	e, _, hit := f.start(c, req)
	if hit != hitNone {
		return nil, nil, hit.code() // the listener throttles every cap alike
	}
	e.stop = context.AfterFunc(base, func() { e.cancel(context.Cause(base)) })
	return e, &e.ctx, ""
}

// register is start without the caps: the Kafka listener's fetches
// answered from its read-ahead (no Kafka exchange), still counted towards
// them and revocable like any other.
// Its context also ends with base.
func (f *inflight) register(base context.Context, c *ocap.Claims, req authz.Request) (*fetchEntry, context.Context) {
	f.mu.Lock()
	e := f.registerLocked(c, req, holderOf(c), tenantOf(c))
	f.mu.Unlock()
	e.stop = context.AfterFunc(base, func() { e.cancel(context.Cause(base)) })
	return e, &e.ctx
}

func (f *inflight) registerLocked(c *ocap.Claims, req authz.Request, holder string, tenant tenantKey) *fetchEntry {
	return f.registerCounted(c, req, holder, tenant, f.byHolder[holder], f.byTenant[tenant])
}

// registerCounted is registerLocked with the holder's and tenant's counts
// already looked up (nil when they have none).
func (f *inflight) registerCounted(c *ocap.Claims, req authz.Request, holder string, tenant tenantKey, byHolder, byTenant *int) *fetchEntry {
	e := &fetchEntry{holder: holder, tenant: tenant}
	f.reg.Put(&e.entry, c, req, e)
	if (byHolder == nil || byTenant == nil) && len(f.byHolder)+len(f.byTenant) >= f.sweepAt {
		// A sweep may drop a zero count looked up before it: look again.
		f.sweep()
		byHolder, byTenant = f.byHolder[holder], f.byTenant[tenant]
	}
	if byHolder == nil {
		byHolder = new(int)
		f.byHolder[holder] = byHolder
	}
	if byTenant == nil {
		byTenant = new(int)
		f.byTenant[tenant] = byTenant
	}
	e.byHolder, e.byTenant = byHolder, byTenant
	*e.byHolder++
	*e.byTenant++
	if f.closed != nil {
		e.cancel(f.closed)
	}
	return e
}

// count is what a count of byHolder or byTenant says (nil: 0).
func count(n *int) int {
	if n == nil {
		return 0
	}
	return *n
}

// sweep drops the zero counts (f.mu held) and sets the size of the
// next sweep to twice what is left, at least minSweep.
func (f *inflight) sweep() {
	for k, n := range f.byHolder {
		if *n <= 0 {
			delete(f.byHolder, k)
		}
	}
	for k, n := range f.byTenant {
		if *n <= 0 {
			delete(f.byTenant, k)
		}
	}
	f.sweepAt = max(minSweep, 2*(len(f.byHolder)+len(f.byTenant)))
}

// shutdown cancels every fetch in flight, and every one started later,
// with cause.
func (f *inflight) shutdown(cause error) {
	f.mu.Lock()
	f.closed = cause
	var all []*fetchEntry
	for _, e := range f.reg.All() {
		all = append(all, e.Value)
	}
	f.mu.Unlock()
	for _, e := range all {
		e.cancel(cause)
	}
}

// finish unregisters e once its response is decided and encoded.
func (f *inflight) finish(e *fetchEntry) {
	f.mu.Lock()
	f.reg.Remove(&e.entry)
	*e.byHolder--
	*e.byTenant--
	done := e.done
	f.mu.Unlock()
	if e.stop != nil {
		e.stop()
	}
	e.cancel(nil)
	if done != nil {
		close(done)
	}
}

// count is the number of fetches in flight.
func (f *inflight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reg.Len()
}

// cancelBelow cancels the fetches of key admitted under an epoch below
// epoch and returns how many; it does not wait for them.
func (f *inflight) cancelBelow(key authz.FenceKey, epoch uint64, cause error) int {
	f.mu.Lock()
	victims := f.reg.Below(key, epoch)
	f.mu.Unlock()
	for _, e := range victims {
		e.Value.cancel(cause)
	}
	f.cancelled.Add(int64(len(victims)))
	return len(victims)
}

// revoke cancels every fetch the view no longer allows after changes
// (guard.Registry.Refused) and waits until each has finished (answered
// 409, or completed a response it had already decided before the
// change). Only then may the sync client acknowledge the update. It
// returns how many fetches it cancelled.
func (f *inflight) revoke(ctx context.Context, ch authz.Changes, view *authz.View, now time.Time) int {
	f.mu.Lock()
	victims := f.reg.Refused(ch, view, now)
	for _, e := range victims {
		// Still registered (f.mu held), so finish has not taken done
		// yet: it will close this one.
		if e.Value.done == nil {
			e.Value.done = make(chan struct{})
		}
	}
	f.mu.Unlock()
	for _, e := range victims {
		e.Value.cancel(errFenced)
	}
	f.cancelled.Add(int64(len(victims)))
	for _, e := range victims {
		select {
		case <-e.Value.done:
		case <-ctx.Done():
			return len(victims)
		}
	}
	return len(victims)
}
