package coordinator_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/store"
)

// TestFailClosed: when the store refuses a batch (here an epoch regression
// planted behind the machine's back) nothing of that Ready is sent, every
// request gets 503 and Run returns the store's error.
func TestFailClosed(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	err := coordinator.StoreOf(h.c).Update(func(w *store.Writer) error { return w.PutEpoch("g", "orders", 0, 100) })
	if err != nil {
		t.Fatal(err)
	}
	held := a.heldHeartbeat(5000)
	h.expectError(t, "POST", "/v1/admin/groups/g/partitions/orders/0/revoke", e.adminToken, nil, 503, api.CodeUnavailable)
	if r := <-held; r.err == nil {
		t.Fatalf("held heartbeat answered %+v after the failed persist; want 503", r.resp)
	}
	if err := h.stopErr(); !errors.Is(err, store.ErrEpochRegression) {
		t.Fatalf("Run returned %v, want the epoch regression", err)
	}
	if len(e.logs.FilterMessage("persist failed: event loop stopped, failing closed").All()) != 1 {
		t.Fatal("failure not logged")
	}
}

// TestShutdownAnswersHeldPolls: Close answers held heartbeats and sync
// polls at once (503) instead of letting them run out their wait.
func TestShutdownAnswersHeldPolls(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 2})
	e.cfg.Groups.HeartbeatWait = 20 * time.Second
	e.cfg.Groups.SyncWaitMax = 10 * time.Second
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	gw := newGateway(h, "gw1")
	seq := gw.poll(t, 0, 0).Seq
	polled := make(chan error, 1)
	go func() {
		r, err := gw.tryPoll(seq, 10000)
		if err == nil {
			err = fmt.Errorf("answered %+v", r)
		} else {
			err = nil
		}
		polled <- err
	}()
	held := a.heldHeartbeat(20000)
	eventually(t, func() string {
		select {
		case r := <-held:
			t.Fatalf("heartbeat answered early: %+v %v", r.resp, r.err)
		default:
		}
		if n := h.metric(t, "capgate_coordinator_heartbeats_held"); n != 1 {
			return fmt.Sprintf("%v heartbeats held, want 1", n)
		}
		return ""
	})
	start := time.Now()
	if err := h.stopErr(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if r := <-held; r.err == nil {
		t.Fatalf("held heartbeat got %+v, want 503", r.resp)
	}
	if err := <-polled; err != nil {
		t.Fatalf("held sync poll: %v, want 503", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("shutdown took %v", elapsed)
	}
}

// TestLongPollOutlivesReadTimeout: a heartbeat may be held longer than
// read_timeout, which bounds reading the request only.
func TestLongPollOutlivesReadTimeout(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 1})
	e.cfg.ReadTimeout = 200 * time.Millisecond
	e.cfg.WriteTimeout = 200 * time.Millisecond
	h := e.start(t)
	creds := h.clientCredential(t, []string{"g"}, []string{"orders"})
	a := h.join(t, "g", creds, api.JoinRequest{Topics: []string{"orders"}})
	start := time.Now()
	resp := a.heartbeat(t, 600)
	if elapsed := time.Since(start); elapsed < 600*time.Millisecond || len(resp.Revoke)+len(resp.Grants) != 0 {
		t.Fatalf("heartbeat answered after %v with %+v; want an empty answer after the 600ms wait", elapsed, resp)
	}
}
