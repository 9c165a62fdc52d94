package coordinator

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/driver"
	"github.com/capgate/capgate/coordinator/group"
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
	r, err := driver.RenderGrants(grants, resolve, c.now(), until, c.keys.minter, c.offsets)
	if r.ResolveErr != nil {
		c.log.Warn("resolve start offsets; grants keep the earliest/latest sentinel", zap.Error(r.ResolveErr))
	}
	for _, g := range r.Late {
		c.log.Warn("grant expired before it was minted", zap.String("group", g.Group),
			zap.String("topic", g.Topic), zap.Int32("partition", g.Partition), zap.Uint64("epoch", g.Epoch))
	}
	return r, err
}

// Resolve implements driver.Resolver: Kafka lookups off the loop, cached.
func (r *offsetResolver) Resolve(grants []group.Grant) error {
	return r.resolve(context.Background(), grants)
}

func rfc3339(unix int64) string { return driver.RFC3339(unix) }
