package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/ocap"
)

// TestGroupAPIRefusesInvalidGroupNames: a group name the coordinator
// refuses (ocap.ValidName) is refused before any request, as a final
// bad_request that says the rule. A name with '/' reached the
// coordinator as another path (/v1/groups/a/b/join, the escape decoded
// before routing) and came back as a 404 "no such route" (redteam4
// item 8). A valid name still goes out.
func TestGroupAPIRefusesInvalidGroupNames(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	a := NewGroupAPI(srv.URL, nil, 0)
	defer a.CloseIdleConnections()
	ctx := context.Background()
	for _, group := range []string{"a/b", "my group", "café", "tab\there", ".", "..", "", strings.Repeat("g", 256)} {
		if ocap.ValidName(group) {
			t.Fatalf("%q: ocap.ValidName takes it; the test's names must be invalid", group)
		}
		for _, kind := range []driver.Kind{driver.KindJoin, driver.KindHeartbeat, driver.KindCommit, driver.KindLeave} {
			ans := a.Attempt(ctx, group, "credential", driver.Send{Kind: kind, Join: &api.JoinRequest{}, Commit: &api.CommitRequest{}})
			f := ans.Failure
			if f == nil || f.Code != api.CodeBadRequest || f.Status != http.StatusBadRequest || !f.Final || !strings.Contains(f.Err.Error(), "no space, no '/'") {
				t.Errorf("Attempt(%q, kind %d): failure %+v; want a final bad_request naming the rule", group, kind, f)
			}
		}
		if _, err := a.Offsets(ctx, group, "token"); err == nil || !strings.Contains(err.Error(), "no space, no '/'") {
			t.Errorf("Offsets(%q): %v; want the rule", group, err)
		}
		if err := CheckGroupName(group); err == nil {
			t.Errorf("CheckGroupName(%q) = nil", group)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests sent for invalid names; want none", n)
	}
	for _, group := range []string{"g", "a.b-c_d:e", "!~", strings.Repeat("g", 255)} {
		if err := CheckGroupName(group); err != nil {
			t.Errorf("CheckGroupName(%q) = %v; ocap.ValidName takes it", group, err)
		}
	}
	if ans := a.Attempt(ctx, "g", "credential", driver.Send{Kind: driver.KindLeave}); ans.Failure != nil {
		t.Errorf("leave of a valid group: %v", ans.Failure.Err)
	}
	if requests.Load() != 1 {
		t.Errorf("a valid group's leave sent %d requests; want 1", requests.Load())
	}
}
