package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
)

// revokeParams: Revokes partitions revoked one after another, then one
// member holding BulkPartitions revoked at once, with Gateways gateways.
type revokeParams struct {
	Gateways       int
	Revokes        int
	BulkPartitions int
}

// revokeResult is the revocation propagation of one gateway count.
type revokeResult struct {
	Gateways int
	// One partition revoke: from sending the admin revoke until its answer,
	// which comes once every gateway acknowledged the fence.
	P50, P99, Max time.Duration
	// Baseline: GET /v1/admin/gateways, an admin round trip through the
	// coordinator's event loop that waits for nobody.
	BaseP50, BaseP99 time.Duration
	// Bulk: revoking a member that holds BulkPartitions partitions, until
	// every gateway acknowledged the resulting sync sequence.
	BulkPartitions int
	BulkFenced     int
	BulkAnswer     time.Duration // the admin call's own answer
	BulkAcked      time.Duration
	BulkStages     fenceStages
}

const (
	fenceTopic = "fence"
	bulkTopic  = "bulk"
)

// runRevoke runs both measurements on a fresh stack.
func runRevoke(tb testing.TB, p revokeParams) revokeResult {
	tb.Helper()
	var applied appliedLog
	s := startDeployment(tb, deploymentOptions{
		Topics:      map[string]int32{fenceTopic: int32(p.Revokes), bulkTopic: int32(p.BulkPartitions)},
		Gateways:    p.Gateways,
		Coordinator: func(c *coordinator.Config) { c.Groups.SessionTimeoutMax = 10 * time.Minute },
		Tee:         applied.core,
	})
	defer s.close(tb)
	r := revokeResult{Gateways: p.Gateways, BulkPartitions: p.BulkPartitions}
	r.P50, r.P99, r.Max = revokeOneByOne(tb, s, p.Revokes)
	r.BaseP50, r.BaseP99 = adminBaseline(tb, s, p.Revokes)
	r.BulkFenced, r.BulkAnswer, r.BulkAcked, r.BulkStages = bulkFence(tb, s, &applied)
	return r
}

// revokeOneByOne has a member take every partition of the fence topic,
// then revokes them one after another and times each answer.
func revokeOneByOne(tb testing.TB, s *deployment, n int) (p50, p99, most time.Duration) {
	const group = "fence-g"
	m, err := joinRaw(context.Background(), s.HTTP(), s.CoordinatorURL(), group, fenceTopic, s.credential(tb, group), (10 * time.Minute).Milliseconds())
	if err != nil {
		tb.Fatalf("join: %v", err)
	}
	if held := m.held(); held != n {
		tb.Fatalf("member holds %d partitions, want %d", held, n)
	}
	lat := make([]time.Duration, n)
	for i := range n {
		path := "/v1/admin/groups/" + group + "/partitions/" + fenceTopic + "/" + strconv.Itoa(i) + "/revoke"
		start := time.Now()
		if _, err := s.admin(http.MethodPost, path, coordinator.RevokeRequest{Reason: "bench"}, nil); err != nil {
			tb.Fatalf("revoke %d: %v", i, err)
		}
		lat[i] = time.Since(start)
	}
	return quantiles(lat)
}

func adminBaseline(tb testing.TB, s *deployment, n int) (p50, p99 time.Duration) {
	lat := make([]time.Duration, n)
	for i := range n {
		start := time.Now()
		if _, err := s.admin(http.MethodGet, "/v1/admin/gateways", nil, nil); err != nil {
			tb.Fatalf("admin gateways: %v", err)
		}
		lat[i] = time.Since(start)
	}
	p50, p99, _ = quantiles(lat)
	return p50, p99
}

// bulkFence has one member take every partition of the bulk topic, revokes
// the member, and polls the gateways' acknowledgements until all of them
// acknowledged the sequence that carried the fences; stages says where
// the time went (fenceStages).
func bulkFence(tb testing.TB, s *deployment, applied *appliedLog) (fenced int, answer, acked time.Duration, stages fenceStages) {
	const group = "bulk-g"
	m, err := joinRaw(context.Background(), s.HTTP(), s.CoordinatorURL(), group, bulkTopic, s.credential(tb, group), (10 * time.Minute).Milliseconds())
	if err != nil {
		tb.Fatalf("bulk join: %v", err)
	}
	var before coordinator.GatewaysResponse
	if _, err := s.admin(http.MethodGet, "/v1/admin/gateways", nil, &before); err != nil {
		tb.Fatalf("admin gateways: %v", err)
	}
	persisted0, persists0 := persistTotals(tb, s)
	var resp coordinator.MemberRevokeResponse
	stopProfile := profilePhase(tb, "bulk-fence-"+strconv.Itoa(len(s.Gateways())))
	defer stopProfile()
	start := time.Now()
	if _, err := s.admin(http.MethodPost, "/v1/admin/groups/"+group+"/members/"+m.ID+"/revoke", struct{}{}, &resp); err != nil {
		tb.Fatalf("revoke member: %v", err)
	}
	answer = time.Since(start)
	persisted1, persists1 := persistTotals(tb, s)
	var target uint64
	deadline := start.Add(time.Minute)
	for {
		var gws coordinator.GatewaysResponse
		if _, err := s.admin(http.MethodGet, "/v1/admin/gateways", nil, &gws); err != nil {
			tb.Fatalf("admin gateways: %v", err)
		}
		if target == 0 {
			target = gws.Seq // the first look after the revoke answered
		}
		if allAcked(gws, target, len(s.Gateways())) {
			acked = time.Since(start)
			persisted2, persists2 := persistTotals(tb, s)
			stages = fenceStages{
				Persist: persisted1 - persisted0, PersistN: persists1 - persists0,
				LastAck: lastAck(tb, gws).Sub(start),
				After:   persisted2 - persisted1, AfterN: persists2 - persists1,
			}
			ats := applied.first(before.Seq)
			if len(ats) != len(s.Gateways()) {
				tb.Fatalf("%d of %d gateways logged applying seq %d", len(ats), len(s.Gateways()), target)
			}
			first, last := appliedSpread(ats)
			stages.FirstApplied, stages.LastApplied = first.Sub(start), last.Sub(start)
			return resp.Fenced, answer, acked, stages
		}
		if time.Now().After(deadline) {
			tb.Fatalf("gateways did not acknowledge seq %d within a minute: %+v", target, gws.Gateways)
		}
	}
}

func allAcked(gws coordinator.GatewaysResponse, seq uint64, want int) bool {
	if len(gws.Gateways) < want {
		return false
	}
	for _, g := range gws.Gateways {
		if g.Acked < seq {
			return false
		}
	}
	return true
}

func (r revokeResult) String() string {
	return fmt.Sprintf("%d gateways: revoke p50 %v p99 %v (admin baseline p50 %v); bulk %d fenced, answer %v, acked %v",
		r.Gateways, r.P50, r.P99, r.BaseP50, r.BulkFenced, r.BulkAnswer, r.BulkAcked)
}
