package harness_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/e2e/harness"
)

// fakeSync answers every poll with seq after+1 and one fence of epoch
// after+1.
func fakeSync(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
		_ = json.NewEncoder(w).Encode(api.SyncResponse{Seq: after + 1, Fences: []api.Fence{{Group: "g", Topic: "orders", Epoch: after + 1}}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// noReuse sends every request on a new connection: Go's transport
// silently retries a GET that failed on a reused one, which would hide a
// drop.
var noReuse = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func poll(tap *harness.SyncTap, after uint64) (uint64, error) {
	resp, err := noReuse.Get(fmt.Sprintf("%s/v1/sync?gateway=gw1&after=%d", tap.URL(), after))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var u api.SyncResponse
	err = json.NewDecoder(resp.Body).Decode(&u)
	return u.Seq, err
}

func TestSyncTapRecordsAndHolds(t *testing.T) {
	log := harness.NewLog()
	tap, err := harness.StartSyncTap(log, fakeSync(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	if seq, err := poll(tap, 0); err != nil || seq != 1 {
		t.Fatalf("poll through the tap: seq %d, %v", seq, err)
	}

	tap.HoldAnswers(func(f api.Fence) bool { return f.Epoch == 2 })
	answered := make(chan uint64)
	go func() { seq, _ := poll(tap, 1); answered <- seq }()
	harness.Eventually(t, 10*time.Second, "answer held", func() (bool, string) { return tap.Held() == 1, fmt.Sprint(tap.Held()) })
	tap.Release()
	if seq := <-answered; seq != 2 {
		t.Fatalf("released answer: seq %d, want 2", seq)
	}

	tap.HoldAcks(func(f api.Fence) bool { return f.Epoch == 3 })
	if seq, err := poll(tap, 2); err != nil || seq != 3 {
		t.Fatalf("the answer carrying the fence passes: seq %d, %v", seq, err)
	}
	failed := make(chan error)
	go func() { _, err := poll(tap, 3); failed <- err }() // the ack of seq 3
	harness.Eventually(t, 10*time.Second, "ack held", func() (bool, string) { return tap.Held() == 1, fmt.Sprint(tap.Held()) })
	tap.Drop()
	if err := <-failed; err == nil {
		t.Fatal("a dropped poll succeeded")
	}

	s := log.Snapshot()
	if len(s.SyncAnswers) != 3 || len(s.SyncPolls) != 4 {
		t.Fatalf("recorded %d answers and %d polls, want 3 and 4: %+v %+v", len(s.SyncAnswers), len(s.SyncPolls), s.SyncAnswers, s.SyncPolls)
	}
	if last := s.SyncPolls[3]; last.After != 3 || last.Forwarded != 0 {
		t.Errorf("the dropped ack: %+v, want after 3, never forwarded", last)
	}
	if a := s.SyncAnswers[1]; a.Seq != 2 || len(a.Fences) != 1 || a.Fences[0].Epoch != 2 {
		t.Errorf("the held answer: %+v", a)
	}
}
