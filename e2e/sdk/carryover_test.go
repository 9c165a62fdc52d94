package sdk_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
)

// TestRenewalCarriesTheMemberOver: member tokens last 4 s here
// (member_token_ttl), while the credential both consumers joined with
// lasts far longer — as a long-lived credential meets the coordinator's
// 24 h member_token_ttl. Each renewal is a rejoin by member id with
// that credential and the member token (renew_token), which the
// coordinator takes: the member keeps its id, partitions and epochs and
// nothing in the group moves. Before, each renewal released every
// partition, left and joined as a new member: the other member was
// granted the renewing member's partitions at the leave and gave some
// back at the join, twice per member token per member.
func TestRenewalCarriesTheMemberOver(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 4,
		CoordinatorConfig: func(cfg *coordinator.Config) { cfg.MemberTokenTTL = 4 * time.Second }})
	carriedOver(t, c, "carry", sdk.MemberOptions{})
}

// TestIdPRenewalCarriesTheMemberOver: the same with tokens of an IdP that
// last 4 s each, a fresh one from the consumers' credential source at
// every renewal — the identity (issuer and subject) is the member's, so
// each renewal is carried over as well.
func TestIdPRenewalCarriesTheMemberOver(t *testing.T) {
	t.Parallel()
	idp := idptest.New(t, "ES256")
	oidc := identity.DefaultConfig()
	oidc.Issuers = []identity.IssuerConfig{{
		Issuer: idp.URL, CAFile: idp.CAFile, Audiences: []string{"capgate"},
		Rules: []identity.Rule{{Claim: "groups", Value: "billing", Groups: []string{"billing-*"}, Topics: []string{"orders"}}},
	}}
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 4,
		CoordinatorConfig: func(cfg *coordinator.Config) { cfg.OIDC = oidc }})
	source := func(context.Context) (string, error) {
		now := time.Now()
		return idp.Token(idptest.Claims{"sub": "svc-billing", "aud": "capgate", "groups": []string{"billing"},
			"iat": now.Unix(), "exp": now.Add(4 * time.Second).Unix()}), nil
	}
	carriedOver(t, c, "billing-eu", sdk.MemberOptions{Options: []client.Option{client.WithCredentialSource(source)},
		Configure: func(cfg *client.Config) {
			cfg.Credential = "" // the source's
			cfg.CapabilityExpiryMargin = 300 * time.Millisecond
		}})
}

// TestCredentialRotationCarriesTheMemberOver: each member's credential
// source hands out a new admin-minted credential of one name at every
// join (4 s each, so a renewal every ~2 s). An admin-minted credential
// is its own tenant, so the renewal's bearer alone is not the member's
// holder; the SDK presents the credential the member is bound to beside
// it (renew_credential) and the member is renewed in place. Before, each
// renewal was refused (unknown_member) and the member renewed anew —
// released, left, joined — and the other member took its partitions and
// gave them back: a rebalance of the group at every renewal.
func TestCredentialRotationCarriesTheMemberOver(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 4})
	source := func(ctx context.Context) (string, error) {
		return c.Stack.ClientCredential(ctx, "e2e-rotated", []string{"rotated"}, []string{c.Topic}, 4*time.Second)
	}
	carriedOver(t, c, "rotated", sdk.MemberOptions{Options: []client.Option{client.WithCredentialSource(source)},
		Configure: func(cfg *client.Config) {
			cfg.Credential = "" // the source's
			cfg.CapabilityExpiryMargin = 300 * time.Millisecond
		}})
}

// carriedOver runs two members of group with opts, waits for three
// renewals of each and checks that none left, no partition moved between
// them and every record was delivered once.
func carriedOver(t *testing.T, c *sdk.Cluster, group string, opts sdk.MemberOptions) {
	load := c.StartLoad(t, sdk.LoadOptions{Interval: 10 * time.Millisecond})
	opts.Group, opts.CommitInterval = group, 200*time.Millisecond
	opts.Name = "m1"
	m1 := c.NewMember(t, opts)
	opts.Name = "m2"
	m2 := c.NewMember(t, opts)
	members := []*sdk.Member{m1, m2}
	sdk.Eventually(t, wait, "the group settled: two partitions each", func() (bool, string) {
		return len(m1.Assigned()) == 2 && len(m2.Assigned()) == 2, ""
	})
	held := map[*sdk.Member][]int32{m1: m1.Assigned(), m2: m2.Assigned()}
	settled := time.Now()
	joins := map[*sdk.Member]int{m1: m1.Transport.Calls("join"), m2: m2.Transport.Calls("join")}
	sdk.Eventually(t, 30*time.Second, "three renewals of each member", func() (bool, string) {
		for _, m := range members {
			if m.Transport.Calls("join")-joins[m] < 3 || m.PollErr() != nil {
				return false, ""
			}
		}
		return true, ""
	})
	load.Stop()
	end := c.LogEnd(t)
	ledger := sdk.WaitDelivered(t, wait, end, m1, m2)
	ledger.ExactlyOnce(t, end)
	ledger.Exclusive(t, c.Partitions)
	for _, m := range members {
		if err := m.PollErr(); err != nil {
			t.Fatalf("%s failed: %v", m.Name, err)
		}
		if n := m.Transport.Calls("leave"); n != 0 {
			t.Errorf("%s left %d times renewing its member, want carried over", m.Name, n)
		}
		for _, h := range m.Hooks() {
			if h.At.Before(settled) {
				continue
			}
			for _, p := range h.Partitions {
				if !slices.Contains(held[m], p) {
					t.Errorf("%s: %s of partition %d at +%v: the group reassigned around a renewal (held %v)",
						m.Name, h.Kind, p, h.At.Sub(settled).Round(time.Millisecond), held[m])
				}
			}
			if h.Kind == sdk.HookLost {
				t.Errorf("%s lost %v at +%v", m.Name, h.Partitions, h.At.Sub(settled))
			}
		}
	}
	t.Logf("%d + %d renewals, %d records delivered once each", m1.Transport.Calls("join")-joins[m1], m2.Transport.Calls("join")-joins[m2], ledger.Count())
}
