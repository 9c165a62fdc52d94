package guard_test

import (
	"errors"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/gateway/guard"
)

// TestPollingIsNotSyncing pins what the coordinator's lag rule rests on
// (coordinator/group/lag.go): a gateway is in sync only through answers
// it applied, counted from when their poll was sent — not through polls.
// One that keeps polling but applies nothing (here a delta below its ack,
// after which it polls with after=0, then resets it cannot take) refuses
// everything sync_timeout after the last poll whose answer it applied,
// however often it polls meanwhile; a reset it applies is in sync and
// carries every fence (its seq is acknowledged by the next poll). Under
// silent_gateways: serve it keeps serving, which is why the coordinator
// applies the rule only under fence.
func TestPollingIsNotSyncing(t *testing.T) {
	const timeout = 10 * time.Second
	fence := api.Fence{Group: "g", Topic: "t", Partition: 0, Epoch: 2}
	for _, serve := range []bool{false, true} {
		s := *settings
		if serve {
			s.SilentGateways = "serve"
		}
		view := authz.NewView(authz.Config{})
		f := guard.NewFollower(guard.SyncConfig{Timeout: timeout, BackoffMin: time.Millisecond, BackoffMax: time.Second}, view)
		if _, err := f.Apply(api.SyncResponse{Seq: 7, Reset: true, Settings: &s}, t0); err != nil {
			t.Fatal(err)
		}
		f.Acked(t0, 7)

		// From t0+1s on it polls every second and every answer fails.
		for i := 1; i <= 30; i++ {
			sent := t0.Add(time.Duration(i) * time.Second)
			var err error
			if i == 1 {
				_, err = f.Apply(api.SyncResponse{Seq: 3, Fences: []api.Fence{fence}}, sent) // below its ack: after=0 from now on
			} else {
				_, err = f.Apply(api.SyncResponse{Seq: 9, Reset: true, Fences: []api.Fence{fence}}, sent) // a reset it cannot take (no settings)
			}
			if err == nil {
				t.Fatalf("poll %d: a broken answer applied", i)
			}
			f.Failed(func(n int64) int64 { return 0 })
			code := f.Refusal(sent)
			switch inSync := !sent.After(t0.Add(timeout)); {
			case serve && code != "":
				t.Fatalf("serve, poll %d at +%s: %q, want serving", i, sent.Sub(t0), code)
			case !serve && inSync && code != "":
				t.Fatalf("poll %d at +%s: %q, want in sync within sync_timeout of the last applied poll", i, sent.Sub(t0), code)
			case !serve && !inSync && code != api.CodeOutOfSync:
				t.Fatalf("poll %d at +%s: %q, want out_of_sync: polling without applying is not syncing", i, sent.Sub(t0), code)
			}
		}
		if view.Fence("g", "t", 0) != 0 {
			t.Fatalf("serve %t: a fence of an answer never applied is in the view", serve)
		}

		// A reset applied is a sync: all fences, in sync from its poll's send.
		sent := t0.Add(31 * time.Second)
		if _, err := f.Apply(api.SyncResponse{Seq: 9, Reset: true, Settings: &s, Fences: []api.Fence{fence}}, sent); err != nil {
			t.Fatal(err)
		}
		f.Acked(sent, 9)
		if code := f.Refusal(sent.Add(timeout)); code != "" || view.Fence("g", "t", 0) != 2 || f.After() != 9 {
			t.Fatalf("after a reset applied: %q, fence %d, after %d", code, view.Fence("g", "t", 0), f.After())
		}
		if _, err := f.Apply(api.SyncResponse{Seq: 8}, sent); !errors.Is(err, guard.ErrSeqWentBack) {
			t.Fatalf("an answer older than the reset: %v", err)
		}
	}
}
