package session

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// TestRenewalOfReleasedEpochReleasesAgain: the partition was given up on
// a gateway 409 (a denied jti, no fence) and the release did not reach
// the coordinator, which keeps renewing the same epoch. The session
// answers that renewal with a release under the fresh capability (no
// offset), instead of ignoring it forever.
func TestRenewalOfReleasedEpochReleasesAgain(t *testing.T) {
	h := newHarness(t)
	f := one[Fetch](t, h.join(grant(pA, 3, 10, "cap-old", h.now.Add(time.Minute))))
	acts := h.fail(f, api.CodeCapabilityRevoked)
	hook := one[CallRevoke](t, acts)
	acts = h.step(HookDone{Now: h.now, ID: hook.ID})
	release := one[Commit](t, acts)
	if !release.Release || release.Offsets[0].Capability != "cap-old" {
		t.Fatalf("first release %+v", release)
	}
	h.step(CommitDone{Now: h.now, ID: release.ID, Code: api.CodeCapabilityRevoked})
	if len(h.s.Assigned()) != 0 {
		t.Fatalf("still assigned %v", h.s.Assigned())
	}
	acts = h.news(api.HeartbeatResponse{Renew: []api.Grant{grant(pA, 3, 10, "cap-new", h.now.Add(time.Minute))}})
	again := one[Commit](t, acts)
	if !again.Release || len(again.Offsets) != 1 || again.Offsets[0].Capability != "cap-new" || again.Offsets[0].Offset != -1 {
		t.Fatalf("second release %+v", again)
	}
	none[Fetch](t, acts)
	// A grant of a lower epoch is still ignored without a release.
	none[Commit](t, h.news(api.HeartbeatResponse{Grants: []api.Grant{grant(pA, 2, 0, "cap-older", h.now.Add(time.Minute))}}))
	// The coordinator moves it: a higher epoch is granted and read.
	f = one[Fetch](t, h.news(api.HeartbeatResponse{Grants: []api.Grant{grant(pA, 4, 10, "cap-4", h.now.Add(time.Minute))}}))
	if f.Capability != "cap-4" || f.Offset != 10 {
		t.Fatalf("fetch after the regrant %+v", f)
	}
}
