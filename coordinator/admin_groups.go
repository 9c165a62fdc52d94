package coordinator

// Behavior: admin, groups resource — bearer: an admin token.
//   GET /v1/admin/groups        → GroupsResponse, names sorted.
//   GET /v1/admin/groups/{g}    → GroupDescription: config, live members,
//     partitions with owner, epoch, state, committed offset and lag
//     (latest offset − committed, read from Kafka best-effort within
//     broker_timeout, for groups of up to describe_lag_max partitions);
//     404 for an unknown group.
//   PUT /v1/admin/groups/{g}/config with GroupConfigRequest → the
//     resulting GroupConfigView; creates the group if needed; 400 for a
//     setting out of bounds, 409 inconsistent_assignor when members use
//     another assignor.

import (
	"context"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

func (c *Coordinator) handleAdminGroups(ctx *fasthttp.RequestCtx, _ []string) {
	var names []string
	if err := c.query(func(m *group.Machine) { names = m.Groups() }); err != nil {
		writeMachineError(ctx, nil, err)
		return
	}
	if names == nil {
		names = []string{}
	}
	writeJSON(ctx, fasthttp.StatusOK, GroupsResponse{Groups: names})
}

func (c *Coordinator) handleAdminGroup(ctx *fasthttp.RequestCtx, params []string) {
	groupName := params[0]
	if !groupParam(ctx, groupName) {
		return
	}
	var d group.GroupDescription
	found := false
	if err := c.query(func(m *group.Machine) { d, found = m.DescribeGroup(groupName) }); err != nil {
		writeMachineError(ctx, nil, err)
		return
	}
	if !found {
		writeError(ctx, api.CodeNotFound, "unknown group "+groupName)
		return
	}
	out := describeView(d)
	if len(out.Partitions) <= c.cfg.DescribeLagMax {
		c.fillLag(out.Partitions)
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

func describeView(d group.GroupDescription) GroupDescription {
	out := GroupDescription{
		Group: d.Group, Config: configView(d.Config),
		Members: make([]MemberView, 0, len(d.Members)), Partitions: make([]PartitionView, 0, len(d.Partitions)),
	}
	for _, m := range d.Members {
		v := MemberView{
			ID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, Topics: m.Topics, TopicPattern: m.TopicPattern,
			SessionTimeoutMs: m.SessionTimeout.Milliseconds(), LastContact: timeText(m.LastContact), Partitions: m.Partitions,
		}
		if m.Credential.ID != "" {
			v.Credential = &CredentialView{ID: m.Credential.ID, Issuer: m.Credential.Issuer, Subject: m.Credential.Subject}
		}
		out.Members = append(out.Members, v)
	}
	for _, p := range d.Partitions {
		v := PartitionView{
			Topic: p.Topic, Partition: p.Partition, Epoch: p.Epoch, State: string(p.State),
			Owner: p.Owner, OwnerOutside: p.OwnerOutside, OwnerEpoch: p.OwnerEpoch,
			Target: p.Target, TargetOutside: p.TargetOutside,
			CapabilityExpiresAt: timeText(p.CapabilityExpiry), RevokeStarted: timeText(p.RevokeStarted),
			GatewaysSafe: p.GatewaysSafe, Released: p.Released, Metadata: p.Metadata,
		}
		if p.Committed >= 0 {
			committed := p.Committed
			v.Committed = &committed
		}
		if p.LeaseHolder != "" {
			v.Lease = &LeaseView{Holder: p.LeaseHolder, Outside: p.LeaseOutside, Until: timeText(p.LeaseUntil)}
		}
		out.Partitions = append(out.Partitions, v)
	}
	return out
}

// fillLag looks up the latest offsets of partitions (cached, a few at a
// time) and fills LatestOffset and Lag where Kafka answered in time.
func (c *Coordinator) fillLag(parts []PartitionView) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.BrokerTimeout)
	defer cancel()
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(resolveWorkers, len(parts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				p := &parts[i]
				_, latest, err := c.offsets.lookup(ctx, p.Topic, p.Partition)
				if err != nil {
					continue
				}
				p.LatestOffset = &latest
				if p.Committed != nil {
					lag := max(latest-*p.Committed, 0)
					p.Lag = &lag
				}
			}
		}()
	}
	for i := range parts {
		next <- i
	}
	close(next)
	wg.Wait()
}

func (c *Coordinator) handleAdminGroupConfig(ctx *fasthttp.RequestCtx, params []string) {
	groupName := params[0]
	if !groupParam(ctx, groupName) {
		return
	}
	var req GroupConfigRequest
	if !decodeBody(ctx, &req, false) {
		return
	}
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.SetGroupConfig{
			Ref: ref, Group: groupName, Assignor: req.Assignor, OffsetReset: req.OffsetReset,
			SessionTimeout: msPointer(req.SessionTimeoutMs), HandoffTimeout: msPointer(req.HandoffTimeoutMs),
			MaxMovesPerSecond: req.MaxMovesPerSecond,
		}
	})
	reply, ok := msg.(group.GroupConfigReply)
	if !ok {
		writeMachineError(ctx, msg, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, configView(reply.Config))
}

func configView(g group.GroupConfig) GroupConfigView {
	return GroupConfigView{
		Assignor: g.Assignor, SessionTimeoutMs: g.SessionTimeout.Milliseconds(), HandoffTimeoutMs: g.HandoffTimeout.Milliseconds(),
		MaxMovesPerSecond: g.MaxMovesPerSecond, OffsetReset: g.OffsetReset,
	}
}

// timeText renders t as RFC 3339 in UTC with milliseconds, "" for zero.
func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func msDuration(ms int64) time.Duration {
	return time.Duration(ms) * time.Millisecond
}

func msPointer(ms *int64) *time.Duration {
	if ms == nil {
		return nil
	}
	d := msDuration(*ms)
	return &d
}
