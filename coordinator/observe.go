package coordinator

import (
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
	"github.com/capgate/capgate/store"
)

// observer is the coordinator's driver.Observer: metrics, the Kafka
// offset mirror and the console's timeline. It runs in the loop's
// goroutine.
type observer struct {
	c         *Coordinator
	revokedAt map[handoffKey]time.Time // handoffs in flight, for the duration histogram
}

// handoffKey names one partition of one group.
type handoffKey struct {
	group, topic string
	partition    int32
}

func newObserver(c *Coordinator) *observer {
	return &observer{c: c, revokedAt: make(map[handoffKey]time.Time)}
}

// Persisted feeds the coordinator's own revocation view (before any reply
// of the Ready goes out) and hands committed offsets to the Kafka mirror.
func (o *observer) Persisted(rd group.Ready) {
	o.c.revocations.apply(rd.Persist, o.c.now())
	o.reaped(rd.Persist)
	if !o.c.cfg.MirrorOffsets {
		return
	}
	for _, r := range rd.Persist {
		if off, ok := r.(group.OffsetRecord); ok && off.Offset >= 0 && !off.Kept {
			o.c.mirror.add(off.Group, off.Topic, off.Partition, off.Offset)
		}
	}
}

// The reason label of capgate_coordinator_groups_reaped_total: the
// delay that applied (group/reap.go reapAfter) — offsets_retention for a
// group that held committed offsets, empty_group_ttl otherwise.
const (
	reapEmpty   = "empty_group_ttl"
	reapOffsets = "offsets_retention"
)

// reaped logs and counts the groups the reaper forgot in a Ready (a
// deleted GroupRecord: only the reaper deletes one) and the committed
// offsets limits.offsets_retention expired with them (their
// OffsetRecords deleted in the same Ready).
func (o *observer) reaped(records []group.Record) {
	var groups []string
	for _, r := range records {
		if g, ok := r.(group.GroupRecord); ok && g.Deleted {
			groups = append(groups, g.Group)
		}
	}
	if len(groups) == 0 {
		return
	}
	dropped := make(map[string]int)
	for _, r := range records {
		if off, ok := r.(group.OffsetRecord); ok && off.Offset < 0 {
			dropped[off.Group]++
		}
	}
	withOffsets, offsets := 0, 0
	for _, g := range groups {
		if n := dropped[g]; n > 0 {
			withOffsets, offsets = withOffsets+1, offsets+n
		}
	}
	met := o.c.metrics
	met.groupsReaped.WithLabelValues(reapEmpty).Add(float64(len(groups) - withOffsets))
	met.groupsReaped.WithLabelValues(reapOffsets).Add(float64(withOffsets))
	met.offsetsExpired.Add(float64(offsets))
	o.c.log.Info("groups reaped", zap.Int("groups", len(groups)), zap.Int("groups_with_offsets", withOffsets),
		zap.Int("offsets_expired", offsets), zap.Strings("first", groups[:min(len(groups), 10)]))
}

// Sending feeds the metrics and the console's timeline from a Ready
// whose messages are about to go out.
func (o *observer) Sending(now time.Time, rd group.Ready, m *group.Machine) {
	for _, msg := range rd.Messages {
		o.observe(msg, now)
	}
	o.c.timeline.Observe(now, rd, m) // the console's handoff timeline; never blocks
	o.c.metrics.syncSeq.Set(float64(m.SyncSeq()))
	o.c.reportLagging(m)
}

// observe feeds the metrics from a message delivered at now.
func (o *observer) observe(msg group.Message, now time.Time) {
	met := o.c.metrics
	switch m := msg.(type) {
	case group.News:
		for _, r := range m.Revoke {
			key := handoffKey{m.Group, r.Topic, r.Partition}
			if _, ok := o.revokedAt[key]; !ok {
				o.revokedAt[key] = now
			}
			met.revokes.WithLabelValues("handoff").Inc()
		}
		o.granted(m.Grants, now)
		met.renewals.Add(float64(len(m.Renew)))
	case group.JoinReply:
		o.granted(m.Grants, now)
	case group.LeaseReply:
		o.granted([]group.Grant{m.Grant}, now)
	case group.RevokeReply:
		met.revokes.WithLabelValues("admin").Inc()
	case group.RevokeMemberReply:
		if !m.AlreadyRevoked {
			met.revokes.WithLabelValues("member").Inc()
		}
	case group.Rejected:
		if label := limitLabel(m.Details); m.Code == api.CodeLimitExceeded && joinLimits[label] {
			met.joinLimits.WithLabelValues(label).Inc()
		}
	}
}

// joinLimits are the labels of join refusals: the machine also refuses
// sync polls (gateways) and admin requests (qos_overrides, denied; groups
// for a group config, counted here with the joins' groups) 409
// limit_exceeded, which are not joins.
var joinLimits = map[string]bool{"groups": true, "members_per_group": true, "groups_per_credential": true,
	group.CountedGroupsCreated: true, "members_per_credential": true, "state_bytes": true, "state_bytes_per_tenant": true}

// limitLabel is the limit label of a join's limit_exceeded refusal: the
// setting's last name (the machine's own, a fixed set), or
// groups_created for the created-groups count of groups_per_credential.
func limitLabel(details map[string]any) string {
	if details["counted"] == group.CountedGroupsCreated {
		return group.CountedGroupsCreated
	}
	limit, _ := details["limit"].(string)
	return strings.TrimPrefix(limit, "coordinator.groups.limits.")
}

func (o *observer) granted(grants []group.Grant, now time.Time) {
	for _, g := range grants {
		o.c.metrics.grants.Inc()
		key := handoffKey{g.Group, g.Topic, g.Partition}
		if at, ok := o.revokedAt[key]; ok {
			o.c.metrics.handoff.Observe(now.Sub(at).Seconds())
			delete(o.revokedAt, key)
		}
	}
}

// timedStore times each persist for the persist histogram.
type timedStore struct {
	c *Coordinator
	b store.Backend
}

func (s timedStore) Update(fn func(w *store.Writer) error) error {
	start := time.Now()
	err := s.b.Update(fn)
	s.c.metrics.persist.Observe(time.Since(start).Seconds())
	return err
}
