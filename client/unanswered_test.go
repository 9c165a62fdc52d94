package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// TestUnanswered: a fetch no gateway answered is remembered until any
// gateway answers one (a refusal counts as an answer; a cancelled fetch
// counts as nothing), and each gateway's failures are logged at most once
// per unansweredLogEvery, the next line counting those left out.
func TestUnanswered(t *testing.T) {
	var u unanswered
	now := time.Unix(1000, 0)
	refused := errors.New("dial tcp: connection refused")
	if log, _ := u.note(0, refused, now); !log || u.last != refused {
		t.Fatalf("first failure: log %v, last %v", log, u.last)
	}
	for i := range 3 {
		if log, _ := u.note(0, refused, now.Add(time.Duration(i)*time.Second)); log {
			t.Fatalf("failure %d within %s logged again", i, unansweredLogEvery)
		}
	}
	if log, _ := u.note(1, refused, now); !log {
		t.Fatal("another gateway's first failure not logged")
	}
	if log, missed := u.note(0, refused, now.Add(unansweredLogEvery)); !log || missed != 3 {
		t.Fatalf("after %s: log %v, missed %d, want true 3", unansweredLogEvery, log, missed)
	}
	u.note(0, fmt.Errorf("wrapped: %w", context.Canceled), now)
	if u.last != refused {
		t.Fatalf("a cancelled fetch changed the last failure: %v", u.last)
	}
	u.note(0, &Error{Op: "fetch demo/0", Code: api.CodeOutOfSync, Status: 503}, now)
	if u.last != nil {
		t.Fatalf("a refusal is an answer, last still %v", u.last)
	}
	u.note(1, refused, now)
	u.note(1, nil, now)
	if u.last != nil {
		t.Fatalf("an answered fetch, last still %v", u.last)
	}
}

// TestFetchHintOncePerGateway: WithFetchHint's hint goes with the first
// logged failure of each gateway's outage — the failures go on being
// logged every unansweredLogEvery, the hint is not repeated with them —
// and again with the first failure after that gateway answered (a new
// outage, hours later perhaps: the first hint has scrolled away); another
// gateway's answer does not count.
func TestFetchHintOncePerGateway(t *testing.T) {
	var u unanswered
	if !u.hintDue(0) || u.hintDue(0) || !u.hintDue(1) || u.hintDue(1) || u.hintDue(0) {
		t.Fatalf("hints given: %v, want gateways 0 and 1 once each", u.hinted)
	}
	now := time.Unix(1000, 0)
	u.note(1, nil, now)
	if u.hintDue(0) {
		t.Fatal("gateway 1 answered, and gateway 0's outage was hinted again")
	}
	if !u.hintDue(1) || u.hintDue(1) {
		t.Fatal("gateway 1 answered and failed again: want its new outage hinted once")
	}
	u.note(0, &Error{Op: "fetch demo/0", Code: api.CodeOutOfSync, Status: 503}, now)
	if !u.hintDue(0) {
		t.Fatal("gateway 0 answered (a refusal) and failed again: want its new outage hinted")
	}
}
