package stack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/coordinators"
)

// replicasElecting starts two replica doubles that answer 421
// not_leader naming no leader (mid-election) to their first calls each,
// then the second leads and mints; the stack's Admin goes through them.
func replicasElecting(t *testing.T, calls int64) (*Stack, *atomic.Int64) {
	var minted atomic.Int64
	replica := func(leads bool) string {
		var seen atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if seen.Add(1) <= calls || !leads {
				w.WriteHeader(http.StatusMisdirectedRequest)
				_, _ = w.Write(api.EncodeError(api.CodeNotLeader, "does not lead (candidate); no leader known yet", map[string]any{"leader": ""}))
				return
			}
			minted.Add(1)
			_, _ = w.Write([]byte(`{"client_credential":"cred","jti":"j","ops":["consume"],"expires_at":"2030-01-01T00:00:00Z"}`))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	s := &Stack{opts: Options{Coordinators: 2}, http: &http.Client{Timeout: 5 * time.Second}, AdminToken: "admin"}
	for _, leads := range []bool{false, true} {
		s.coordinators = append(s.coordinators, &Coordinator{partAddr: partAddr{URL: replica(leads)}})
	}
	return s, &minted
}

// TestClientCredentialWaitsOutAnElection: the harness's ClientCredential
// (POST /v1/admin/clients) while no replica leads is sent again until
// one does (lost2's setup flake: it failed at the first 421); with no
// leader within the budget, the error says what happened.
func TestClientCredentialWaitsOutAnElection(t *testing.T) {
	old := adminRetry
	t.Cleanup(func() { adminRetry = old })
	adminRetry = coordinators.Retry{Budget: 5 * time.Second, Base: 10 * time.Millisecond, Max: 50 * time.Millisecond}

	s, minted := replicasElecting(t, 3)
	cred, err := s.ClientCredential(context.Background(), "svc", []string{"g"}, nil, time.Minute)
	if err != nil || cred != "cred" || minted.Load() != 1 {
		t.Fatalf("ClientCredential during an election: %q, %v, minted %d", cred, err, minted.Load())
	}

	adminRetry.Budget = 200 * time.Millisecond
	s, minted = replicasElecting(t, 1<<30)
	_, err = s.ClientCredential(context.Background(), "svc", []string{"g"}, nil, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "no coordinator replica led after") || minted.Load() != 0 {
		t.Fatalf("with no leader: %v (minted %d)", err, minted.Load())
	}
}
