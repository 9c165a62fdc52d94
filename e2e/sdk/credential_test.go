package sdk_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestConsumerReadsAcrossCredentialRenewals: a member token never
// outlives the credential it was joined with, so a consumer whose
// credentials last 4 s (a short IdP or OAuth token, renewed by its
// source) must renew its member before each token runs out. Before the
// SDK did, the member token expired, every heartbeat was refused 401
// token_expired and retried for ever, capabilities were never renewed,
// and the consumer stopped reading for good after its first credential.
// Now each renewal revokes and releases every partition (processed
// offsets committed), leaves, and joins with the source's fresh
// credential: the consumer reads on through several renewals with every
// record delivered exactly once and no partition read by two holders.
func TestConsumerReadsAcrossCredentialRenewals(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 4})
	load := c.StartLoad(t, sdk.LoadOptions{Interval: 10 * time.Millisecond})
	var issued atomic.Int32
	source := func(ctx context.Context) (string, error) {
		issued.Add(1)
		return c.Stack.ClientCredential(ctx, "e2e-short", []string{"short"}, []string{c.Topic}, 4*time.Second)
	}
	// Each renewal's leave answers the member's own held heartbeat
	// unknown_member: expected, so not at info (newuser3 #7).
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(zapcore.NewTee(core, sdk.Logger(t).Core())).Named("m1")
	m := c.NewMember(t, sdk.MemberOptions{Name: "m1", Group: "short", CommitInterval: 200 * time.Millisecond,
		Options: []client.Option{client.WithCredentialSource(source), client.WithLogger(log)},
		Configure: func(cfg *client.Config) {
			cfg.Credential = "" // the source's
			cfg.CapabilityExpiryMargin = 300 * time.Millisecond
		}})
	start := time.Now()
	sdk.Eventually(t, 30*time.Second, "three credential renewals, the member reading after each", func() (bool, string) {
		n := issued.Load()
		return n >= 4 && len(m.Assigned()) > 0 && m.PollErr() == nil, ""
	})
	load.Stop()
	end := c.LogEnd(t)
	ledger := sdk.WaitDelivered(t, wait, end, m)
	ledger.ExactlyOnce(t, end)
	ledger.Exclusive(t, c.Partitions)
	if err := m.PollErr(); err != nil {
		t.Fatalf("consumer failed: %v", err)
	}
	for _, h := range m.Hooks() {
		if h.Kind == sdk.HookLost {
			t.Errorf("partitions %v lost at %v (the member token ran out instead of being renewed)", h.Partitions, h.At.Sub(start))
		}
	}
	unknown := logs.FilterMessage("heartbeat: member unknown to the coordinator")
	if n := unknown.FilterLevelExact(zapcore.InfoLevel).Len(); n != 0 {
		t.Errorf("%d renewals logged their own heartbeat's unknown_member at info", n)
	}
	t.Logf("%v: %d credentials, %d records delivered once each; %d own heartbeats answered unknown_member (debug)",
		time.Since(start).Round(time.Millisecond), issued.Load(), ledger.Count(), unknown.FilterLevelExact(zapcore.DebugLevel).Len())
}
