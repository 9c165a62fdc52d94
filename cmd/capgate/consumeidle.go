package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
)

// groupDescriber reads the consumer's group as its client credential
// may (GET /v1/groups/{group}, the tenant's view Kafka's DescribeGroups
// shows).
type groupDescriber func(ctx context.Context) (api.TenantGroupDescription, error)

// tenantGroupDescriber is groupDescriber for cfg's group and credential.
func (f *consumeFlags) tenantGroupDescriber(cfg client.Config) groupDescriber {
	return func(ctx context.Context) (api.TenantGroupDescription, error) {
		var desc api.TenantGroupDescription
		hc, err := f.endpoints.tls.httpClient(cfg.RequestTimeout)
		if err != nil {
			return desc, err
		}
		c, err := newAdminClient(strings.Join(append([]string{cfg.CoordinatorURL}, cfg.CoordinatorURLs...), ","), cfg.Credential, hc)
		if err != nil {
			return desc, err
		}
		return desc, c.do(ctx, http.MethodGet, "/v1/groups/"+url.PathEscape(cfg.Group), nil, &desc)
	}
}

// idleWithoutPartitions is consume --idle-exit's end when the member
// holds no partition: it exited 0, "nothing to read", also when the
// member's partitions were still on their way (a handoff from the
// members before it, a grant not yet sent). The group's state tells:
// Stable with this member holding none — the other members hold every
// partition its assignor gives out (more members than partitions), or
// there is none (a pattern matching no topic) — is idle, said on stderr,
// exit 0; a rebalance still in progress (or this member not in the
// group) is not: exit 1 saying so.
func idleWithoutPartitions(ctx context.Context, idleExit time.Duration, group, member string, describe groupDescriber, stderr io.Writer) error {
	desc, err := describe(ctx)
	if err != nil {
		return fmt.Errorf("consume: no partition was granted within --idle-exit %s, and group %s could not be read to tell whether one is on its way: %w", idleExit, group, err)
	}
	found, holders, held := false, 0, 0
	for _, m := range desc.Members {
		if m.MemberID == member {
			found = true
			continue
		}
		if len(m.Owned) > 0 {
			holders, held = holders+1, held+len(m.Owned)
		}
	}
	switch {
	case !found:
		return fmt.Errorf("consume: no partition was granted within --idle-exit %s: this member (%s) is not in group %s — its join has not finished (a longer --idle-exit waits for it)", idleExit, member, group)
	case desc.State != "Stable":
		return fmt.Errorf("consume: no partition was granted within --idle-exit %s: group %s is %s — its partitions are still being handed out (a longer --idle-exit waits for them)", idleExit, group, desc.State)
	case held == 0:
		fmt.Fprintf(stderr, "consume: idle for --idle-exit %s with no partition: group %s has no partition to give out (its topics have none, or its topic pattern matches none)\n", idleExit, group)
	default:
		fmt.Fprintf(stderr, "consume: idle for --idle-exit %s with no partition: group %s is Stable and every partition it gives out (%d) is held by another member (%d of them: more members than partitions)\n", idleExit, group, held, holders)
	}
	return nil
}
