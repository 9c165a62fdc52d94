package ha

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
)

// TestLeaderKilledDuringAnOAuthClientRevoke: member a reads with a token
// of an OAuth client (/oauth/token), b with another credential, when an
// operator revokes the OAuth client at the leading replica; the
// revoke's state-log write is held at the broker and the leader is
// killed -9 in the middle. The operator's call gets no answer (it may or
// may not have landed). The repeat at the replica that took over must
// be a 200 — the client revoked, its live token denied — never an error;
// then the client gets no more tokens (401 invalid_client), a's member
// is gone and its consumer ends saying its credential was revoked, b
// holds every partition and reads on, no fetch of b's is answered 503,
// every checker holds (the forced move of a's partitions aside, as for
// any member revoke).
func TestLeaderKilledDuringAnOAuthClientRevoke(t *testing.T) {
	t.Parallel()
	const group = "ha-oauth-revoke"
	c := startHA(t, group, nil)
	hold := holdNextLogWrite(c)
	var created coordinator.OAuthClientCreated
	c.MustAdmin(t, http.MethodPost, "/v1/admin/oauth/clients", coordinator.OAuthClientRequest{
		Name: "ha-oauth", Groups: []string{group}, Topics: []string{c.Topic()}}, &created)
	token, err := oauthToken(context.Background(), c, created.ClientID, created.ClientSecret)
	if err != nil {
		t.Fatal(err)
	}
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group, Credential: token})
	b := c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	c.WaitSettled(t, group, 2)
	c.WaitFlowing(t, group, 100)
	old := a.MemberID()

	path := "/v1/admin/oauth/clients/" + created.ClientID + "/revoke"
	revokeAt := harness.Now()
	killed, next, at := hold.killLeaderMidCall(t, c, http.MethodPost, path, nil)
	var again coordinator.OAuthClientRevoked
	status, body, err := c.Admin(http.MethodPost, path, nil, &again)
	t.Logf("the repeat at %s answered %d %s", next.Name, status, body)
	if err != nil || status != http.StatusOK || again.ClientID != created.ClientID {
		t.Fatalf("the revoke repeated after the takeover answered %d %s (%v), want 200: the client revoked", status, body, err)
	}
	if _, err := oauthToken(context.Background(), c, created.ClientID, created.ClientSecret); err == nil || !strings.Contains(err.Error(), "invalid_client") {
		t.Errorf("a token request of the revoked client: %v, want invalid_client", err)
	}
	waitGone(t, c, group, old, "a's member, opened by the denied token, gone")
	harness.Eventually(t, harness.Wait, "a's consumer ends", func() (bool, string) {
		return a.Err() != nil, "still running"
	})
	if err := a.Err(); !strings.Contains(err.Error(), "revoked") {
		t.Errorf("a's consumer ended with %v: want it to say its credential was revoked", err)
	}
	t.Logf("a's consumer ended: %v", a.Err())
	c.WaitSettled(t, group, 1)
	c.WaitFlowing(t, group, 100)
	killed.Restart(t)
	prod.Stop()
	// What a read and did not commit stays undelivered to b only if a's
	// last commit is behind; every record must reach b or have reached a.
	c.WaitDelivered(t, group, harness.Wait)
	s := c.Log.Snapshot()
	for _, v := range harness.CheckAll(s, c.Params()) {
		forced := v.Invariant == harness.InvGrantAfterSafe && v.At >= revokeAt &&
			strings.Contains(v.Detail, "but "+old+" neither released, left nor died")
		if !forced {
			t.Errorf("invariant violated: %s", v)
		}
	}
	n := 0
	for _, f := range s.ClientFetches {
		if f.Consumer == b.Name && f.Sent >= at && f.Status == 503 {
			n++
		}
	}
	if n > 0 {
		t.Errorf("%d fetches of b since the kill answered 503", n)
	}
}

// oauthToken gets a token for OAuth client id from /oauth/token
// (client_credentials), asking each replica in turn until one answers.
func oauthToken(ctx context.Context, c *harness.Cluster, id, secret string) (string, error) {
	var errs []error
	for _, co := range c.Replicas {
		cfg := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: co.URL + "/oauth/token"}
		tctx, cancel := context.WithTimeout(context.WithValue(ctx, oauth2.HTTPClient, c.HTTP()), 2*time.Second)
		tok, err := cfg.Token(tctx)
		cancel()
		if err == nil {
			return tok.AccessToken, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", co.Name, err))
	}
	return "", errors.Join(errs...)
}
