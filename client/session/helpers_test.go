package session

import (
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

var (
	pA = Partition{"orders", 0}
	pB = Partition{"orders", 1}
)

func testConfig() Config {
	return Config{
		BufferMaxBytes: 1 << 20,
		PollMaxRecords: 1000,
		RevokeTimeout:  5 * time.Second,
		ExpiryMargin:   2 * time.Second,
		FullChecks:     true,
	}
}

// harness drives one session with a hand-moved clock.
type harness struct {
	t   *testing.T
	s   *Session
	now time.Time
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{t: t, s: New(testConfig()), now: t0}
}

func (h *harness) step(e Event) []Action { return h.s.Step(e) }

func (h *harness) advance(d time.Duration) { h.now = h.now.Add(d) }

// join joins with grants and returns the actions.
func (h *harness) join(grants ...api.Grant) []Action {
	return h.step(Joined{Now: h.now, Response: api.JoinResponse{
		MemberID: "m1", MemberToken: "member-token", HeartbeatWaitMs: 3000, Grants: grants,
	}})
}

func (h *harness) news(n api.HeartbeatResponse) []Action {
	return h.step(NewsArrived{Now: h.now, Incarnation: h.s.Member().Incarnation, News: n})
}

func (h *harness) revoke(p Partition, epoch uint64) []Action {
	return h.news(api.HeartbeatResponse{Revoke: []api.PartitionRef{{Topic: p.Topic, Partition: p.Partition, Epoch: epoch}}})
}

// complete answers fetch f with n records starting at f.Offset.
func (h *harness) complete(f Fetch, n int) []Action {
	offsets := make([]int64, n)
	for i := range offsets {
		offsets[i] = f.Offset + int64(i)
	}
	return h.step(FetchDone{
		Now: h.now, ID: f.ID, Partition: f.Partition, Records: n, Bytes: int64(10 * n),
		Next: f.Offset + int64(n), Payload: offsets,
	})
}

func (h *harness) fail(f Fetch, code api.Code) []Action {
	return h.step(FetchDone{Now: h.now, ID: f.ID, Partition: f.Partition, Code: code, Earliest: -1, Latest: -1})
}

func (h *harness) poll() []Batch {
	acts := h.step(Polled{Now: h.now})
	return one[Deliver](h.t, acts).Batches
}

func grant(p Partition, epoch uint64, offset int64, capability string, expires time.Time) api.Grant {
	return api.Grant{
		Topic: p.Topic, Partition: p.Partition, Epoch: epoch, Offset: offset,
		Capability: capability, ExpiresAt: expires.Format(time.RFC3339),
	}
}

// all returns the actions of type T.
func all[T Action](acts []Action) []T {
	var out []T
	for _, a := range acts {
		if v, ok := a.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// one returns the single action of type T, failing otherwise.
func one[T Action](t *testing.T, acts []Action) T {
	t.Helper()
	got := all[T](acts)
	if len(got) != 1 {
		var zero T
		t.Fatalf("want exactly one %T, got %d in %s", zero, len(got), describe(acts))
	}
	return got[0]
}

// none fails if acts holds an action of type T.
func none[T Action](t *testing.T, acts []Action) {
	t.Helper()
	if got := all[T](acts); len(got) > 0 {
		var zero T
		t.Fatalf("want no %T, got %s", zero, describe(acts))
	}
}

func describe(acts []Action) string {
	s := "["
	for i, a := range acts {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%T%+v", a, a)
	}
	return s + "]"
}

// offsetsOf flattens the payload offsets of delivered batches of p.
func offsetsOf(batches []Batch, p Partition) []int64 {
	var out []int64
	for _, b := range batches {
		if b.Partition == p {
			out = append(out, b.Payload.([]int64)...)
		}
	}
	return out
}
