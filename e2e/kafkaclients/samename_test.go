package kafkaclients

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/gateway"
)

// TestSameNamedCredentialsShareNothing is redteam7 #1. An admin-minted
// client credential's sub is its free --name, and the README says
// credentials named alike may serve different holders. Tenant A consumes
// group ga as a kgo member with client.id "victim"; tenants B (no right
// to ga or orders) and C (allowed ga and orders, as A) hold credentials
// named "svc" too and connect from the same address naming the same
// client.id. The listener found a fetch's member, counted connections
// and carried members over on re-authentication by issuer + subject
// (+ client.id + address), so
//   - B's raw Fetch of orders was admitted with A's member's capabilities
//     and answered A's records (now TOPIC_AUTHORIZATION_FAILED);
//   - B's connections used up A's kafka_max_connections_per_principal, and
//     A's next connection failed SASL (now A authenticates);
//   - C authenticating and re-authenticating on its own connection handed
//     C's credential to A's member, which the gateway renewed into C's
//     credential and tenant (now A's member stays bound to A's credential
//     and its client is told of no revoke).
//
// A re-authentication with a token of another name is still refused and
// closes the connection (KIP-368: the principal may not change).
func TestSameNamedCredentialsShareNothing(t *testing.T) {
	const budget = 24 // per principal: more than kgo's connections to five brokers
	s := Start(t, Options{Partitions: 2, Gateway: func(c *gateway.Config) { c.KafkaMaxConnectionsPerPrincipal = budget }})
	ctx := context.Background()
	mint := func(name string, groups, topics []string, ttl time.Duration) string {
		t.Helper()
		cred, err := s.Stack.ClientCredential(ctx, name, groups, topics, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return cred
	}
	credA := mint("svc", []string{"ga"}, []string{"orders"}, time.Hour)
	credB := mint("svc", []string{"gb"}, []string{"other"}, time.Hour)
	// C's outlives A's: a renewal's would, so a carry-over rejoins with it.
	credC := mint("svc", []string{"ga"}, []string{"orders"}, 2*time.Hour)
	addr := s.KafkaAddrs()[0]
	// asVictim is a raw connection naming the victim's client.id, from
	// the victim's address (loopback), authenticated with cred.
	asVictim := func(cred string) *rawConn {
		r := dialRaw(t, addr)
		r.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID("victim"))
		if resp := r.authenticate("OAUTHBEARER", cred); resp.ErrorCode != 0 {
			t.Fatalf("authenticate: error %d %v", resp.ErrorCode, resp.ErrorMessage)
		}
		return r
	}

	// B fills the budget of the identity "svc" before A connects.
	flood := make([]*rawConn, budget)
	for i := range flood {
		flood[i] = asVictim(credB)
	}
	r := dialRaw(t, addr)
	if resp := r.authenticate("OAUTHBEARER", credA); resp.ErrorCode != 0 {
		t.Fatalf("A's connection after B opened %d: SASL error %d %v, want A's own budget untouched", budget, resp.ErrorCode, deref(resp.ErrorMessage))
	}
	r.nc.Close()

	produceDirect(t, s, "orders", 0, 5)
	produceDirect(t, s, "orders", 1, 5)
	victim := joinGroup(t, s, "victim", "ga", credA, kip848)
	sdk.Eventually(t, 20*time.Second, "the victim reads both partitions", func() (bool, string) {
		return ledgerOf(victim).count() == 10, fmt.Sprintf("%d of 10 records, assigned %v", ledgerOf(victim).count(), victim.Assigned())
	})

	for p := range int32(2) {
		resp := flood[0].roundTrip(fetchOne("orders", p, 0, 0)).(*kmsg.FetchResponse)
		rp := resp.Topics[0].Partitions[0]
		if rp.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(rp.RecordBatches) > 0 {
			t.Fatalf("B's fetch of orders/%d as client.id victim: error %d, %d bytes of records; want TOPIC_AUTHORIZATION_FAILED, nothing", p, rp.ErrorCode, len(rp.RecordBatches))
		}
	}

	jtiA := driver.TokenID(credA)
	boundTo := func() []string {
		var ids []string
		for _, m := range s.Describe(t, "ga").Members {
			if m.Credential != nil {
				ids = append(ids, m.Credential.ID)
			}
		}
		return ids
	}
	if ids := boundTo(); !slices.Equal(ids, []string{jtiA}) {
		t.Fatalf("group ga's members are bound to %v, want A's credential %s alone", ids, jtiA)
	}
	c := asVictim(credC)
	if resp := c.authenticate("OAUTHBEARER", credC); resp.ErrorCode != 0 {
		t.Fatalf("C's re-authentication with its own credential: error %d", resp.ErrorCode)
	}
	// The victim goes on reading records written after C's
	// re-authentication; by then a carry-over (a rejoin, a release, a
	// leave and a join) would have moved its member to C.
	produceDirect(t, s, "orders", 0, 5)
	produceDirect(t, s, "orders", 1, 5)
	sdk.Eventually(t, 20*time.Second, "the victim reads what was written after C re-authenticated", func() (bool, string) {
		if ids := boundTo(); !slices.Equal(ids, []string{jtiA}) {
			t.Fatalf("after C re-authenticated as client.id victim, group ga's members are bound to %v, want A's credential %s alone", ids, jtiA)
		}
		return ledgerOf(victim).count() == 20, fmt.Sprintf("%d of 20 records", ledgerOf(victim).count())
	})
	if ids := boundTo(); !slices.Equal(ids, []string{jtiA}) {
		t.Fatalf("after C re-authenticated as client.id victim, group ga's members are bound to %v, want A's credential %s alone", ids, jtiA)
	}
	if r := victim.Revoked(); len(r) > 0 {
		t.Fatalf("the victim was told to give up partitions %v after C re-authenticated", r)
	}

	// KIP-368: a re-authentication may not change the principal.
	other := mint("not-svc", []string{"ga"}, []string{"orders"}, time.Hour)
	a := asVictim(credA)
	if resp := a.authenticate("OAUTHBEARER", other); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authentication of A's connection as another name: error %d, want SASL_AUTHENTICATION_FAILED", resp.ErrorCode)
	}
	if !a.closedBy(5 * time.Second) {
		t.Fatal("a re-authentication as another principal did not close the connection")
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
