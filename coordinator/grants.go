package coordinator

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/ocap"
)

// grantOps are the ops of a granted partition capability.
const grantOps = ocap.Ops(ocap.OpFetch | ocap.OpCommit)

// mintGrants turns the machine's grants into api.Grants: start offsets
// resolved against Kafka, capabilities minted with sub=holder, grp, tp,
// pt, ep, op fetch+commit, iat=now and exp exactly the machine's expiry.
// It runs in the handler goroutine, after the loop persisted the Ready the
// grants came in. A grant already expired is dropped (a renewal follows).
// Renewals (resolve false) keep the machine's offset: the holder is
// already reading and ignores it.
func (c *Coordinator) mintGrants(grants []group.Grant, resolve bool) ([]api.Grant, error) {
	out := make([]api.Grant, 0, len(grants))
	if len(grants) == 0 {
		return out, nil
	}
	if resolve {
		if err := c.offsets.resolve(context.Background(), grants); err != nil {
			c.log.Warn("resolve start offsets; grants keep the earliest/latest sentinel", zap.Error(err))
		}
	}
	for _, g := range grants {
		grant, _, ok, err := c.mintGrant(g)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, grant)
		}
	}
	return out, nil
}

// mintGrant mints one grant and returns it with its jti; ok is false for
// a grant that expired before it could be minted.
func (c *Coordinator) mintGrant(g group.Grant) (grant api.Grant, jti string, ok bool, err error) {
	now := c.now()
	ttl := time.Duration(g.ExpiresAt.Unix()-now.Unix()) * time.Second
	if ttl < time.Second {
		c.log.Warn("grant expired before it was minted", zap.String("group", g.Group),
			zap.String("topic", g.Topic), zap.Int32("partition", g.Partition), zap.Uint64("epoch", g.Epoch))
		return api.Grant{}, "", false, nil
	}
	partition := g.Partition
	token, claims, err := c.keys.minter.Mint(ocap.KindCapability, ocap.Claims{
		Subject: g.Holder, Group: g.Group, Topic: g.Topic, Partition: &partition, Epoch: g.Epoch, Ops: grantOps,
	}, now, ttl)
	if err != nil {
		return api.Grant{}, "", false, fmt.Errorf("coordinator: mint grant: %w", err)
	}
	return api.Grant{
		Topic: g.Topic, Partition: g.Partition, Epoch: g.Epoch, Offset: g.Offset,
		Capability: token, ExpiresAt: rfc3339(int64(claims.ExpiresAt)),
	}, claims.ID, true, nil
}

func rfc3339(unix int64) string {
	return time.Unix(unix, 0).UTC().Format(time.RFC3339)
}
