package kafkaclients

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/identity/idptest"
)

// TestAdminGroupsWithIdPIdentity: an IdP identity over SASL (its rules
// map it to billing-*) reads its groups as a credential does — the
// coordinator verifies the IdP token itself on the tenant routes: kadm
// lists billing-eu (its member consuming) and not a credential tenant's
// a-orders, describes billing-eu with its member, fetches its offsets
// from a non-member client, and is refused a-orders
// GROUP_AUTHORIZATION_FAILED.
func TestAdminGroupsWithIdPIdentity(t *testing.T) {
	idp := idptest.New(t, "ES256")
	s := Start(t, Options{Partitions: 4, OIDC: idpConfig(idp)})
	token := idp.Token(idpClaims("svc-billing", nil))
	credA := tenantCredential(t, s, "tenant-a", []string{"a-*"})
	m := joinGroup(t, s, "idp-c1", "billing-eu", token, cooperativeSticky)
	a := joinGroup(t, s, "a1", "a-orders", credA, cooperativeSticky)
	sdk.Eventually(t, 30*time.Second, "both groups settled", func() (bool, string) {
		for _, g := range []string{"billing-eu", "a-orders"} {
			if ok, why := settled(t, s, g, 1); !ok {
				return false, why
			}
		}
		if ok, why := clientsSettled(4, a); !ok {
			return false, why
		}
		return clientsSettled(4, m)
	})
	adm := kadm.NewClient(kgoClient(t, s.KafkaAddrs(), token, false, kgo.ClientID("idp-exporter")))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sdk.Eventually(t, 20*time.Second, "billing-eu listed alone", func() (bool, string) {
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			return false, err.Error()
		}
		_, ok := listed["billing-eu"]
		return ok && len(listed) == 1, fmt.Sprintf("%+v", listed)
	})
	described, err := adm.DescribeGroups(ctx, "billing-eu")
	if d := described["billing-eu"]; err != nil || len(d.Members) != 1 || d.Members[0].ClientID != "idp-c1" {
		t.Errorf("describe billing-eu: %+v %v, want its member idp-c1", d, err)
	}
	if _, err := adm.FetchOffsets(ctx, "billing-eu"); err != nil {
		t.Errorf("fetch billing-eu's offsets without a member: %v", err)
	}
	if _, err := adm.DescribeGroups(ctx, "a-orders"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("the IdP identity describes a-orders: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
}
