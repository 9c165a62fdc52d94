package coordinator

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/driver"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

// mintGrants turns the machine's grants into api.Grants
// (driver.RenderGrants) with the coordinator's minter and offset
// resolver. It runs in the handler goroutine, after the loop persisted
// the Ready the grants came in. Renewals (resolve false) keep the
// machine's offset. No capability expires after until, the member
// token's expiry (zero: no such cap, an admin lease's holder).
func (c *Coordinator) mintGrants(grants []group.Grant, resolve bool, until time.Time) ([]api.Grant, error) {
	r, err := c.renderGrants(grants, resolve, until)
	return r.Grants, err
}

func (c *Coordinator) renderGrants(grants []group.Grant, resolve bool, until time.Time) (driver.Rendered, error) {
	r, err := driver.RenderGrants(grants, resolve, c.now(), until, mintedCache{c.keys.minter, c.tokens}, c.offsets)
	if r.ResolveErr != nil {
		c.log.Warn("resolve start offsets; grants keep the earliest/latest sentinel", zap.Error(r.ResolveErr))
	}
	for _, g := range r.Late {
		c.log.Warn("grant expired before it was minted", zap.String("group", g.Group),
			zap.String("topic", g.Topic), zap.Int32("partition", g.Partition), zap.Uint64("epoch", g.Epoch))
	}
	return r, err
}

// mintedCache is the minter of grants: each capability it signs is put in
// the verified-token cache (c.tokens) under its exact bytes with the
// claims it was signed with — what verifying those bytes would give
// (TestMintedClaimsAreTheVerifiedOnes) — so the commit or release that
// presents it skips the signature check: the coordinator re-verified
// every capability it minted itself (13% of the join storm's CPU,
// BENCHMARKS §4). Nothing else changes: a token not byte-identical to one
// signed here is verified in full, a cached one is refused once
// exp + leeway passes (the cache's rule, Verify's), a retired key's
// entries go with it (FlushKeys at rotation), and the deny-list, the
// claims' group/holder/partition/op and the machine's epochs are checked
// after the cache as before (capabilityVerifier, driver.CommitOffsets).
// The cache's bound (token_cache_entries) holds them with every other
// verified token.
type mintedCache struct {
	m     *ocap.Minter
	cache *ocap.Cache
}

func (mc mintedCache) Mint(kind ocap.Kind, claims ocap.Claims, now time.Time, ttl time.Duration) (string, *ocap.Claims, error) {
	token, signed, err := mc.m.Mint(kind, claims, now, ttl)
	if err == nil {
		mc.cache.Put(token, signed)
	}
	return token, signed, err
}

// Resolve implements driver.Resolver: Kafka lookups off the loop, cached.
func (r *offsetResolver) Resolve(grants []group.Grant) error {
	return r.resolve(context.Background(), grants)
}

func rfc3339(unix int64) string { return driver.RFC3339(unix) }
