package coordinator_test

import (
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
)

// TestOAuthClientRevokeBesideListings: an OAuth client's revoke reads
// the credentials it issued holding only the client's issuing lock
// (13c6ff8 took the registry lock off the store write), and listing the
// clients (GET /v1/admin/oauth/clients) counted each one's live
// credentials by compacting that same list in place (slices.DeleteFunc
// under the registry lock alone): a listing during the revoke rewrote
// the list the revoke was copying, so the revoke could miss a live
// credential — not denied, the members it opened left running. Under
// -race (CI runs this package with it) the listing's write and the
// revoke's read are reported; the revoke must deny the one credential
// still live after the other expired, whatever the listings do
// (review22).
func TestOAuthClientRevokeBesideListings(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	clock := &movedClock{}
	clock.ns.Store(time.Now().UnixNano())
	h := e.start(t, clock.option())
	var created coordinator.OAuthClientCreated
	h.call(t, "POST", "/v1/admin/oauth/clients", e.adminToken,
		coordinator.OAuthClientRequest{Name: "svc", Groups: []string{"g"}, Topics: []string{"orders"}, TokenTTLMs: 60_000}, 200, &created)
	e.remember(created.ClientSecret)
	for round := range 20 {
		h.oauthToken(t, created) // expires first
		clock.add(30 * time.Second)
		h.oauthToken(t, created) // still live after the first expired
		clock.add(31 * time.Second)

		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, _, _, err := h.try("GET", "/v1/admin/oauth/clients", e.adminToken, nil); err != nil {
						return
					}
				}
			}()
		}
		var out coordinator.OAuthClientRevoked
		h.call(t, "POST", "/v1/admin/oauth/clients/"+created.ClientID+"/revoke", e.adminToken, nil, 200, &out)
		close(stop)
		wg.Wait()
		if out.Denied != 1 {
			t.Fatalf("round %d: the revoke denied %d credentials, want the 1 still live", round, out.Denied)
		}
		// The next round's client: a revoked one obtains nothing.
		h.call(t, "POST", "/v1/admin/oauth/clients", e.adminToken,
			coordinator.OAuthClientRequest{Name: "svc", Groups: []string{"g"}, Topics: []string{"orders"}, TokenTTLMs: 60_000}, 200, &created)
		e.remember(created.ClientSecret)
	}
}
