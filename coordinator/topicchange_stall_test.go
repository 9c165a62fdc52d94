package coordinator_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestTopicChangesStallNoOtherTenant: a metadata read that finds new
// topics has the loop match them against the pattern of every live
// pattern member, once per distinct pattern. Tenant A holding 400
// members, each with a pattern of its own that fails slowly on every
// name — each within limits.topic_pattern_steps when it joined — made
// each topic change cost the loop, which tenant B's heartbeats wait for,
// A's patterns × the new topics (50 a change here: ~0.6 s each on an
// unloaded machine). Now A's patterns together are matched within
// topic_pattern_steps per change; those its budget does not cover are
// marked stale (describe's topic_pattern_stale) and follow no new topic
// until they rejoin. B's heartbeats are measured while topics are
// created beside A's 400 patterns, then once A's members left (the
// control); their p99 must stay within max(250 ms, 3 × the control's)
// (the race detector makes the budget's matching ~100 ms now and then;
// all 400 patterns' takes seconds), some of A's members are stale, and
// a probe member of a third tenant sees every created topic.
func TestTopicChangesStallNoOtherTenant(t *testing.T) {
	const (
		patterns = 400 // A's members, each with a pattern of its own
		perBatch = 50  // topics each change adds
	)
	h, tc := startTopicChanges(t, func(e *env) {
		// 64 Ki steps (~0.5 ms of a core; under the race detector, tens of
		// ms): A's patterns take ~45,000 each over the 50 topics (~880 a
		// name), and each change's 50 new names ~44,000 each, so A's budget
		// covers one or two of its 400 patterns a change (all 400: ~18 M
		// steps, ~0.6 s of a core with Go's regexp).
		e.cfg.Groups.Limits.TopicPatternSteps = 1 << 16
		e.cfg.Groups.Limits.TopicPatternsPerTenant = patterns // the subject is a change's matching
	})
	tc.perBatch, tc.name = perBatch, func(k int64, j int) string { return fmt.Sprintf("new-%02d-%03d", k, j) }
	changes := func(n int) []time.Duration {
		lat, unserved, why := tc.measure(t, n)
		if unserved > 0 {
			t.Fatalf("%d of B's heartbeats not served while topics were created, the last: %v", unserved, why)
		}
		return lat
	}
	credA := h.clientCredential(t, []string{"ga"}, []string{"*"})
	var members []*member
	for i := range patterns {
		members = append(members, h.join(t, "ga", credA, api.JoinRequest{SessionTimeoutMs: 300_000, TopicPattern: fmt.Sprintf("(.?){20}z%d", i)}))
	}
	attacked := changes(6)
	var d coordinator.GroupDescription
	h.call(t, "GET", "/v1/admin/groups/ga?limit=1000", h.env.adminToken, nil, 200, &d)
	stale := 0
	for _, m := range d.Members {
		if m.TopicPatternStale != "" {
			stale++
		}
	}
	// The control: the same changes once A's members left.
	for _, m := range members {
		h.call(t, "POST", "/v1/groups/ga/leave", m.token, api.LeaveRequest{}, 200, nil)
	}
	control := changes(6)

	c50, c99 := percentile(control, 50), percentile(control, 99)
	a50, a99 := percentile(attacked, 50), percentile(attacked, 99)
	t.Logf("B's heartbeats while %d topics a change were created: beside A's %d patterns p50 %v p99 %v max %v (%d), %d of A's members stale; "+
		"once they left p50 %v p99 %v (%d)", perBatch, patterns, a50, a99, slices.Max(attacked), len(attacked), stale, c50, c99, len(control))
	if bound := max(250*time.Millisecond, 3*c99); a99 > bound {
		t.Fatalf("B's heartbeat p99 %v beside A's %d patterns while topics were created (p50 %v), %v without: over %v — A's patterns are matched in everyone's loop",
			a99, patterns, a50, c99, bound)
	}
	if stale == 0 {
		t.Fatalf("none of A's %d members marked stale (topic_pattern_stale): its patterns were all matched against every change", patterns)
	}
}

// topicChanges is the stall tests' workload: tenant B's member (group
// gb, on "small") whose heartbeats are measured, and a probe member of
// a third tenant (group gc, `probe-[0-9]+`) that tells when the loop has
// taken every change.
type topicChanges struct {
	h        *harness
	admin    *kgo.Client
	b, probe *member
	batches  atomic.Int64 // created so far, each with one probe topic
	perBatch int          // topics each change adds beside its probe topic
	name     func(change int64, i int) string
}

// startTopicChanges starts a coordinator over "small" and 50 other
// topics, reading metadata every 50 ms, whose join and tenant rates are
// out of the way (the joins come as fast as answered and may be charged
// many steps: neither rate is the subject), tuned by tune before it
// starts, and joins B and the probe.
func startTopicChanges(t *testing.T, tune func(*env)) (*harness, *topicChanges) {
	topics := map[string]int32{"small": 1}
	for i := range 50 {
		topics[fmt.Sprintf("orders-eu-west-%05d", i)] = 1
	}
	e := newEnv(t, topics)
	e.cfg.MetadataInterval = 50 * time.Millisecond
	e.cfg.JoinRate, e.cfg.JoinBurst = 1e6, 1_000_000
	e.cfg.TenantMemberRate, e.cfg.TenantMemberBurst = 1e9, 1_000_000_000
	tune(e)
	h := e.start(t)
	tc := &topicChanges{h: h, admin: kafkaAdmin(t, e)}
	credB := h.clientCredential(t, []string{"gb"}, []string{"small"})
	tc.b = h.join(t, "gb", credB, api.JoinRequest{SessionTimeoutMs: 300_000, Topics: []string{"small"}})
	credC := h.clientCredential(t, []string{"gc"}, []string{"*"})
	tc.probe = h.join(t, "gc", credC, api.JoinRequest{SessionTimeoutMs: 300_000, TopicPattern: `probe-[0-9]+`})
	return h, tc
}

// measure creates n changes at a steady pace (each a probe topic and
// perBatch named by name) while B's heartbeats are measured, until the
// probe member holds every probe topic: the loop has taken every change.
// It answers the heartbeats' latencies, how many were not served and
// why the last was not.
func (tc *topicChanges) measure(t *testing.T, n int) ([]time.Duration, int64, any) {
	var unserved atomic.Int64
	var why atomic.Value
	var created atomic.Int64
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for range n {
			<-tick.C // the pace of topic creation, not a wait for something
			k := tc.batches.Add(1)
			names := []string{fmt.Sprintf("probe-%d", k)}
			for j := range tc.perBatch {
				names = append(names, tc.name(k, j))
			}
			createTopics(t, tc.admin, names)
			created.Add(1)
		}
	}()
	lat := pacedHeartbeats(tc.h, "gb", tc.b.token, func() bool {
		if created.Load() < int64(n) {
			return false
		}
		tc.probe.heartbeat(t, 0)
		tc.probe.mu.Lock()
		defer tc.probe.mu.Unlock()
		return int64(len(tc.probe.grants)) == tc.batches.Load()
	}, &unserved, &why)
	return lat, unserved.Load(), why.Load()
}

func createTopics(t *testing.T, cl *kgo.Client, names []string) {
	req := kmsg.NewPtrCreateTopicsRequest()
	for _, n := range names {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 1, 1
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Errorf("create topics: %v", err)
		return
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 {
			t.Errorf("create topic %s: error %d", rt.Topic, rt.ErrorCode)
		}
	}
}
