package driver_test

import (
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
)

// TestHeartbeatAfterLostAnswerSaysResync: after a heartbeat attempt with
// no answer (timeout, reset) or a 5xx — the coordinator may have decided
// it and counted its news as delivered — every heartbeat says resync
// until one that said it is answered; a refusal (4xx) the machine never
// saw asks for nothing.
func TestHeartbeatAfterLostAnswerSaysResync(t *testing.T) {
	d, cmds := joined(t, config(), 1)
	now := t0
	beat := ofKind(t, cmds, driver.KindHeartbeat)
	next := func(f *driver.Failure) driver.Send {
		t.Helper()
		cmds := d.Answer(driver.Answered{Now: now, Call: beat.Call, Failure: f})
		if f == nil {
			return only(t, cmds, driver.KindHeartbeat)
		}
		now = now.Add(2 * time.Second) // past the backoff
		return only(t, d.Tick(now), driver.KindHeartbeat)
	}
	steps := []struct {
		what   string
		answer *driver.Failure
		resync bool
	}{
		{"refused 429", refused(api.CodeRateLimited, 429), false},
		{"no answer", noAnswer, true},
		{"500 after that", refused(api.CodeInternal, 500), true},
		{"answered, having said resync", nil, false},
		{"503", refused(api.CodeUnavailable, 503), true},
		{"answered again", nil, false},
	}
	if beat.Resync {
		t.Fatalf("first heartbeat says resync")
	}
	for _, s := range steps {
		beat = next(s.answer)
		if beat.Resync != s.resync {
			t.Fatalf("heartbeat after %s: resync %t, want %t", s.what, beat.Resync, s.resync)
		}
	}
}
