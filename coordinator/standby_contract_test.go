package coordinator_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/api/apicheck"
	"github.com/capgate/capgate/coordinator/leader"
)

// TestStandbyAnswersFitTheDocument is redteam4 item 3: a standby replica
// answers every coordinator operation but the public ones 421 not_leader
// naming the leader, while the OpenAPI document listed 421 only for a
// deposed heartbeat and sync. Each operation is called at the standby
// through the validating client (apicheck), which fails an answer whose
// status, code or body (NotLeaderBody: error.leader) the operation does
// not document.
func TestStandbyAnswersFitTheDocument(t *testing.T) {
	s, _, standby, leaderURL := startLeaderAndStandby(t)
	cl, err := apicheck.NewClient(&http.Client{Timeout: 10 * time.Second}, map[string]string{"coordinator": s.replicas[standby].URL()})
	if err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{([^}]+)\}`)
	called := 0
	for _, id := range slices.Sorted(maps.Keys(cl.Ops)) {
		op := cl.Ops[id]
		if !slices.Contains(op.Servers, "coordinator") || (leader.View{}).Route(op.Path) != leader.RouteNotLeader {
			continue
		}
		path := map[string]string{}
		for _, m := range param.FindAllStringSubmatch(op.Path, -1) {
			path[m[1]] = "0"
		}
		var body any
		if op.Method == http.MethodPost || op.Method == http.MethodPut {
			body = []byte(`{}`)
		}
		r, err := cl.Do(context.Background(), apicheck.Call{Op: id, Path: path, Bearer: "x", Body: body, Unchecked: true})
		if err != nil {
			t.Errorf("%s at the standby: %v", id, err)
			continue
		}
		if r.Status != http.StatusMisdirectedRequest || r.Code != api.CodeNotLeader || r.Header.Get(api.HeaderLeader) != leaderURL {
			t.Errorf("%s at the standby: %d %s %q, want 421 not_leader naming %s", id, r.Status, r.Code, r.Header.Get(api.HeaderLeader), leaderURL)
		}
		called++
	}
	if called < 30 {
		t.Fatalf("called %d operations at the standby, want every coordinator operation but the public ones", called)
	}
}

// startLeaderAndStandby starts two replicas over a 3-broker cluster and
// waits until one leads and the other, the standby, names it: a standby
// names the leader until the log was silent for half a lease, 20 beats
// here, however loaded the machine.
func startLeaderAndStandby(t *testing.T) (s *replicaSet, lead, standby int, leaderURL string) {
	t.Helper()
	e := newEnvBrokers(t, map[string]int32{"orders": 2}, 3)
	useKafkaState(t, e)
	e.cfg.Replica.BeatInterval, e.cfg.Replica.LeaseTimeout = 100*time.Millisecond, 4*time.Second
	s = startReplicas(t, e, 2)
	lead = s.awaitLeader(t)
	standby = 1 - lead
	leaderURL = s.replicas[lead].URL()
	eventually(t, func() string { // the standby has read the leader's beat
		if _, hint, _ := s.replicas[standby].Watch(); hint.URL != leaderURL {
			return fmt.Sprintf("standby names %+v, want %s", hint, leaderURL)
		}
		return ""
	})
	return s, lead, standby, leaderURL
}
