package kafkaclients

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestCredentialOfAnotherCoordinatorNamedAtJoin (redteam5 #5): a client
// credential minted by another coordinator (typ capgate-client+jwt, iss
// coord-b) was refused at join as "issuer \"coord-b\" is not a configured
// OIDC issuer (none is configured)": the issuer routing did not look at
// the token's type. It now says what the token is and where it comes
// from, as the Kafka listener does for an unknown key.
func TestCredentialOfAnotherCoordinatorNamedAtJoin(t *testing.T) {
	a := Start(t, Options{Partitions: 1})
	b := startNeighbour(t, a)
	cred, err := b.ClientCredential(context.Background(), "other", []string{"*"}, []string{"*"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	status, refusal := joinAt(t, a.CoordinatorURL, cred, "g", []string{"orders"})
	msg := refusal.Error.Message
	t.Logf("join: %d %s", status, msg)
	want := fmt.Sprintf("a capgate client credential of issuer %q; this coordinator is %q: minted by another coordinator or cluster",
		"coord-b", coordinator.DefaultConfig().ID)
	if status != http.StatusUnauthorized || refusal.Error.Code != api.CodeUnauthorized || !strings.Contains(msg, want) || strings.Contains(msg, "OIDC") {
		t.Fatalf("join with another coordinator's credential: %d %q, want 401 with %q", status, msg, want)
	}
}
