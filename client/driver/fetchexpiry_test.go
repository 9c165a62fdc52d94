package driver_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
)

// TestFetchRetriesStopAtTheCapabilitysExpiry: a fetch refused 503
// out_of_sync (a gateway that lost its coordinator through a long
// takeover) is retried after backoffs — but never with a capability
// within the expiry margin of its expiry: the driver ends it there with
// the failure, the session waits for the partition's renewal, and the
// renewed capability is fetched with at once. Before, the retries went
// on past the expiry: every partition's fetch reached the gateway
// expired, each a failed verification charged to the member at that
// address (gateway auth_failures_per_second), and the gateway refused
// the member's renewed capabilities 429 rate_limited for ~14 s (lost2's
// run3, orders/784).
func TestFetchRetriesStopAtTheCapabilitysExpiry(t *testing.T) {
	d, cmds := joined(t, config(), 1) // capability expires at t0 + 1 min; margin 1 s
	beat := ofKind(t, cmds, driver.KindHeartbeat)
	fetch := ofKind(t, cmds, driver.KindFetch)
	expiry := t0.Add(time.Minute)
	if !fetch.Fetch.ExpiresAt.Equal(expiry) {
		t.Fatalf("the fetch carries expiry %s, want %s", fetch.Fetch.ExpiresAt, expiry)
	}
	// next keeps the latest heartbeat attempt and returns the fetch
	// attempt among cmds, if any.
	next := func(cmds []driver.Command) (driver.Send, bool) {
		var f driver.Send
		var ok bool
		for _, s := range sends(cmds) {
			switch s.Kind {
			case driver.KindHeartbeat:
				beat = s
			case driver.KindFetch:
				f, ok = s, true
			}
		}
		return f, ok
	}
	now, attempts := t0, 1
	for {
		f, ok := next(d.Answer(driver.Answered{Now: now, Call: fetch.Call, Failure: refused(api.CodeOutOfSync, 503)}))
		for !ok {
			if now = d.NextDeadline(); now.IsZero() || now.After(expiry.Add(time.Minute)) {
				break
			}
			f, ok = next(d.Tick(now))
		}
		if !ok {
			break // given up: the session holds the partition for its renewal
		}
		fetch, attempts = f, attempts+1
		if !now.Before(expiry.Add(-time.Second)) {
			t.Fatalf("attempt %d sent at %s with a capability expiring at %s (margin 1s)", attempts, now.Sub(t0), expiry.Sub(t0))
		}
	}
	if attempts < 10 {
		t.Fatalf("given up after %d attempts: want retries until the expiry margin", attempts)
	}
	// The renewal comes: the partition is fetched with the new capability.
	now = expiry.Add(-500 * time.Millisecond)
	renewed := api.Grant{Topic: "t", Partition: 0, Epoch: 1, Capability: "cap-2", ExpiresAt: t0.Add(2 * time.Minute).UTC().Format(time.RFC3339)}
	f, ok := next(d.Answer(driver.Answered{Now: now, Call: beat.Call, News: api.HeartbeatResponse{Renew: []api.Grant{renewed}}}))
	if !ok || f.Token != "cap-2" {
		t.Fatalf("after the renewal: %+v, want a fetch with the renewed capability", f)
	}
}
