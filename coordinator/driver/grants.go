package driver

import (
	"fmt"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

// GrantOps are the ops of a granted partition capability.
const GrantOps = ocap.Ops(ocap.OpFetch | ocap.OpCommit)

// Minter signs capabilities; *ocap.Minter satisfies it.
type Minter interface {
	Mint(kind ocap.Kind, c ocap.Claims, now time.Time, ttl time.Duration) (string, *ocap.Claims, error)
}

// Resolver turns the start-offset sentinels of grants (group.OffsetEarliest,
// group.OffsetLatest) into offsets, in place. A grant it cannot resolve
// keeps its sentinel (the SDK then fetches with offset=earliest|latest);
// the error is only for logging.
type Resolver interface {
	Resolve(grants []group.Grant) error
}

// Rendered is what RenderGrants made, and what a shell may log about it.
type Rendered struct {
	Grants []api.Grant
	JTIs   []string      // of Grants, in order
	Late   []group.Grant // expired before they could be minted (dropped)
	// ResolveErr: a start offset could not be looked up (the grant keeps
	// its sentinel).
	ResolveErr error
}

// RenderGrants turns the machine's grants into api.Grants at now: start
// offsets resolved (grants; renewals, resolve false, keep the machine's
// offset: their holder is already reading), OffsetReset naming the
// group's policy where nothing was committed, capabilities minted with
// sub=holder, tnt=the holder member's tenant (none for an outside
// holder), grp, tp, pt, ep, op fetch+commit, iat=now and exp the
// machine's expiry — or until, when it is earlier and not zero: the
// expiry of the member token the grants are answered to, so no
// capability outlives the member token (and so the credential) it was
// asked for with. Before, a capability renewed just before its member
// token lapsed read on for a whole capability_lease past the credential.
// A token ending before the machine's expiry only ends reading sooner:
// the machine still treats the partition as held until its own expiry
// or a handoff, so no one else is granted it meanwhile. A grant
// expiring within a second is dropped (a renewal follows). It runs after
// the Ready the grants came in was persisted.
func RenderGrants(grants []group.Grant, resolve bool, now, until time.Time, m Minter, r Resolver) (Rendered, error) {
	out := Rendered{Grants: make([]api.Grant, 0, len(grants))}
	if len(grants) == 0 {
		return out, nil
	}
	reset := resetPolicies(grants)
	if resolve {
		out.ResolveErr = r.Resolve(grants)
	}
	for i, g := range grants {
		exp := g.ExpiresAt
		if !until.IsZero() && until.Before(exp) {
			exp = until
		}
		ttl := time.Duration(exp.Unix()-now.Unix()) * time.Second
		if ttl < time.Second {
			out.Late = append(out.Late, g)
			continue
		}
		partition := g.Partition
		token, claims, err := m.Mint(ocap.KindCapability, ocap.Claims{
			Subject: g.Holder, Tenant: g.Tenant, Group: g.Group, Topic: g.Topic, Partition: &partition, Epoch: g.Epoch, Ops: GrantOps,
		}, now, ttl)
		if err != nil {
			return Rendered{}, fmt.Errorf("coordinator: mint grant: %w", err)
		}
		out.Grants = append(out.Grants, api.Grant{
			Topic: g.Topic, Partition: g.Partition, Epoch: g.Epoch, Offset: g.Offset,
			Capability: token, ExpiresAt: RFC3339(int64(claims.ExpiresAt)),
		})
		if reset != nil {
			out.Grants[len(out.Grants)-1].OffsetReset = reset[i]
		}
		out.JTIs = append(out.JTIs, claims.ID)
	}
	return out, nil
}

// resetPolicies names, per grant, the offset_reset policy its start
// offset sentinel stands for ("" for a committed offset), read before
// the sentinels are resolved; nil when every grant starts at a committed
// offset (renewals of committed partitions: no allocation).
func resetPolicies(grants []group.Grant) []string {
	var out []string
	for i, g := range grants {
		if g.Offset >= 0 {
			continue
		}
		if out == nil {
			out = make([]string, len(grants))
		}
		out[i] = group.OffsetResetEarliest
		if g.Offset == group.OffsetLatest {
			out[i] = group.OffsetResetLatest
		}
	}
	return out
}

// RFC3339 renders unix seconds as the API's timestamps.
func RFC3339(unix int64) string {
	return time.Unix(unix, 0).UTC().Format(time.RFC3339)
}
