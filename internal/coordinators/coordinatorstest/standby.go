// Package coordinatorstest holds the one test double of a coordinator
// replica that does not lead, for the unit tests of every client of
// internal/coordinators (gateway sync, SDK, CLI) until real replicas run
// in their tests.
package coordinatorstest

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/capgate/capgate/api"
)

// Standby starts a replica that answers every request 421 not_leader
// naming leader: in the body, and also in the Capgate-Leader header when
// inHeader. Calls counts the requests it got. Closed at the test's end.
func Standby(t testing.TB, leader string, inHeader bool) (srv *httptest.Server, calls *atomic.Int64) {
	calls = new(atomic.Int64)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		if inHeader {
			w.Header().Set(api.HeaderLeader, leader)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusMisdirectedRequest)
		_, _ = w.Write(api.EncodeError(api.CodeNotLeader, "this replica does not lead", map[string]any{"leader": leader}))
	}))
	t.Cleanup(srv.Close)
	return srv, calls
}
