package client

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/api"
)

// TestOwnLeaveIsNoNews: a heartbeat answered unknown_member is news at
// info when the coordinator removed the member, but not when the member
// left on its own — Close (and each credential renewal) leaves while its
// own heartbeat is held, and the coordinator answers that heartbeat
// unknown_member: logged at info, it read like a failure on every clean
// shutdown (newuser3 #7). The leave is held here until that heartbeat's
// answer is logged, so the answer always comes while the member leaves.
func TestOwnLeaveIsNoNews(t *testing.T) {
	var e *env
	e = newEnv(t, func(int) []api.Grant { return []api.Grant{e.grantOf(p0, 1, 0, "cap-p0")} })
	e.store.append(p0, 2)
	core, logs := observer.New(zapcore.DebugLevel)
	unknown := func() []observer.LoggedEntry {
		return logs.FilterMessage("heartbeat: member unknown to the coordinator").AllUntimed()
	}
	logged := make(chan struct{}, 4)
	log := zap.New(core, zap.Hooks(func(entry zapcore.Entry) error {
		if entry.Message == "heartbeat: member unknown to the coordinator" {
			logged <- struct{}{}
		}
		return nil
	}))
	hold := &leaveHold{next: newHTTPClient(nil, 0).Transport, before: func() {
		e.coord.failures <- api.CodeUnknownMember // the held heartbeat's answer
		select {
		case <-logged:
		case <-time.After(waitLimit):
			t.Errorf("the held heartbeat's answer was not logged within %s", waitLimit)
		}
	}}
	c := e.start(e.config(), WithLogger(log), WithHTTPClient(&http.Client{Transport: hold}))
	recv(t, e.coord.joined, "join")
	pollUntil(t, c, countOf(p0, 2))

	e.coord.failures <- api.CodeUnknownMember // removed: news
	recv(t, e.coord.joined, "rejoin")
	recv(t, logged, "the removed member's heartbeat logged")
	waitFor(t, "the rejoin answered", func() bool { return c.MemberID() == "member-2" })
	if got := unknown(); len(got) != 1 || got[0].Level != zapcore.InfoLevel {
		t.Fatalf("a removed member's heartbeat: %+v, want one line at info", got)
	}
	closeNow(t, c)
	if got := unknown(); len(got) != 2 || got[1].Level != zapcore.DebugLevel {
		t.Fatalf("the closing member's own heartbeat: %+v, want its line at debug", got)
	}
}

// leaveHold calls before, then sends a leave request on.
type leaveHold struct {
	next   http.RoundTripper
	before func()
}

func (h *leaveHold) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/leave") {
		h.before()
	}
	return h.next.RoundTrip(r)
}
