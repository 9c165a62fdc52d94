package kafkaclients

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/identity/idptest"
)

// TestKafkaJSRenewsIdPTokens: TestKafkaJSRenewsCapgateCredentials with
// 10 s tokens of an OIDC issuer. An IdP identity keeps its member across
// tokens, so each re-authentication carries the member over (a rejoin of
// the capgate member with the new token: the coordinator fences and
// regrants what it holds — member step 7) and the client must see
// nothing of it: no record read twice, none lost, no rejoin. Before, its
// Fetches in the fence window were answered NOT_LEADER_OR_FOLLOWER and
// its commits ILLEGAL_GENERATION (sent with the fenced capability), on
// both of which KafkaJS rejoins and reads again from its committed
// offsets: 1–4 records read twice in 22 s (4 runs), 4–10 assignments.
func TestKafkaJSRenewsIdPTokens(t *testing.T) {
	idp := idptest.New(t, "ES256")
	logs, observed := observer.New(zap.DebugLevel)
	s := Start(t, Options{Partitions: 2, OIDC: idpConfig(idp), Observe: logs})
	r := kafkajsRenewal{lifetime: envDuration("KJS_LIFETIME", 10*time.Second), threshold: envDuration("KJS_THRESHOLD", 3*time.Second),
		run: envDuration("KJS_RUN", 22*time.Second), group: "billing-kjs", observed: observed,
		renewals: func() int { return observed.FilterMessageSnippet("carried over to the renewed credential").Len() }}
	r.mint = func(context.Context) (string, error) {
		return idp.Token(idpClaims("svc-billing", idptest.Claims{"exp": time.Now().Add(r.lifetime).Unix()})), nil
	}
	out := r.read(t, s)
	if out.renewals < 2 {
		t.Errorf("%d carry-overs, want at least 2: the test did not cross them", out.renewals)
	}
	// Before, each carry-over was a rejoin or two (a Fetch answered
	// NOT_LEADER_OR_FOLLOWER, a commit ILLEGAL_GENERATION): 4–10
	// assignments in 4 carry-overs; now the first one alone as a rule.
	if rejoins := out.assignments - 1; rejoins >= out.renewals {
		t.Errorf("KafkaJS rejoined %d times in %d carry-overs: each carry-over reached the client", rejoins, out.renewals)
	}
}
