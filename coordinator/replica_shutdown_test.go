package coordinator_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/store"
)

// stateOutage holds the state log's transactional produce requests at the
// broker, unanswered, while on — a leader cut off from Kafka: kgo's
// transactional producer waits for an answer to a request it sent, its
// context or not. held is signalled per request held; end answers them
// (processed normally, before any later request), then woke is closed.
type stateOutage struct {
	on      atomic.Bool
	held    chan struct{}
	release chan struct{}
	woke    chan struct{}
	ended   sync.Once
	waked   sync.Once
}

func cutStateLogOff(t *testing.T, e *env) *stateOutage {
	t.Helper()
	o := &stateOutage{held: make(chan struct{}, 16), release: make(chan struct{}), woke: make(chan struct{})}
	cluster := e.kafka.Cluster()
	cluster.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if req := kreq.(*kmsg.ProduceRequest); !o.on.Load() || req.TransactionID == nil {
			return nil, nil, false
		}
		select {
		case o.held <- struct{}{}:
		default:
		}
		cluster.SleepControl(func() { <-o.release })
		o.waked.Do(func() { close(o.woke) })
		return nil, nil, false
	})
	t.Cleanup(o.end) // before the cluster closes
	return o
}

// leaderCutOff is one replica leading on a 3-broker kfake, then cut off
// from the state log.
func leaderCutOff(t *testing.T) (*env, *replicaSet, *stateOutage) {
	t.Helper()
	e := newEnvBrokers(t, map[string]int32{"orders": 1}, 3)
	useKafkaState(t, e)
	s := startReplicas(t, e, 1)
	s.awaitLeader(t)
	out := cutStateLogOff(t, e)
	out.on.Store(true)
	return e, s, out
}

// stateLogOptions are the options of e's state log for a writer or
// reader named writer (outside any replica: a usurper, an observer).
func stateLogOptions(t *testing.T, e *env, writer string) store.KafkaOptions {
	t.Helper()
	client, err := broker.ClientOpts(e.cfg.Broker, e.log)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := e.cfg.KafkaState.Options(client, e.cfg.Cluster, writer, 0, e.log)
	if err != nil {
		t.Fatal(err)
	}
	return opts
}

func (o *stateOutage) end() { o.ended.Do(func() { close(o.release) }) }

// A leader cut off from Kafka stops within its shutdown_timeout on Close
// (SIGTERM), with its beat held at the broker: it cuts the write short
// instead of waiting for Kafka (newuser2 #0a: 75 s and counting, until
// SIGKILL). The next leader fences it: the held request, answered only
// after the new leader took over and wrote, lands nothing — the new
// leader keeps leading unfenced and the log's last commit is its own.
func TestLeaderCutOffFromKafkaStopsWithinItsGrace(t *testing.T) {
	e, s, out := leaderCutOff(t)
	select {
	case <-out.held:
	case <-time.After(20 * time.Second):
		t.Fatal("no write of the leader reached the broker")
	}

	start := time.Now()
	closed := make(chan struct{})
	go func() { s.stop(t, 0); close(closed) }()
	grace := e.cfg.ShutdownTimeout
	select {
	case <-closed:
		t.Logf("leader cut off from Kafka stopped in %s (shutdown_timeout %s, kafka_state.timeout %s)", time.Since(start), grace, e.cfg.KafkaState.Timeout)
	case <-time.After(grace):
		t.Errorf("the leader cut off from Kafka still runs %s after Close (shutdown_timeout)", grace)
		out.end() // Kafka answers: the stop finishes
		<-closed
		t.Logf("it stopped once Kafka answered, %s after Close", time.Since(start))
		t.FailNow()
	}
	if n := e.logs.FilterMessage("coordinator replica stopped").Len(); n != 1 {
		t.Fatalf("%d \"coordinator replica stopped\" lines, want 1", n)
	}

	out.on.Store(false) // Kafka is back; the old leader's request still unanswered
	s.start(t, 1)
	if lead := s.awaitLeader(t); lead != 1 {
		t.Fatalf("replica %d leads", lead)
	}
	h := s.harness(1)
	h.clientCredential(t, []string{"g"}, []string{"orders"}) // a write of the new leader
	out.end()
	<-out.woke // the old request is answered before any later one
	h.clientCredential(t, []string{"g2"}, []string{"orders"})
	if role, _, _ := s.replicas[1].Watch(); role != leader.Leader {
		t.Fatalf("the new leader is %s after the old leader's request was answered", role)
	}
	if got := h.metric(t, "capgate_coordinator_replica_stepdowns_total"); got != 0 {
		t.Fatalf("the new leader stepped down %v times", got)
	}
	f, err := store.FollowKafka(context.Background(), stateLogOptions(t, e, "observer"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.AwaitEnd(ctx); err != nil {
		t.Fatal(err)
	}
	if pos, _ := f.Position(); pos.Writer != "replica-1" {
		t.Fatalf("the log's last commit is %q's, want the new leader's", pos.Writer)
	}
}

// A replica kept from leading by an unreachable log says in /readyz how
// long it has been in its role, live: the reason's own numbers are from
// when the role changed (newuser2 #9: "candidate: no commit in the log
// for 1.625150387s" 14 s later, word for word).
func TestReadyzAgeOfTheRoleIsLive(t *testing.T) {
	_, s, _ := leaderCutOff(t)
	h := s.harness(0)
	readyz := func() string {
		status, body, _ := h.do(t, "GET", "/readyz", "", nil)
		if status != http.StatusServiceUnavailable {
			return ""
		}
		return string(body)
	}
	var first string
	eventually(t, func() string {
		if first = readyz(); !strings.Contains(first, "candidate for ") {
			return "readyz: " + first
		}
		return ""
	})
	eventually(t, func() string {
		now := readyz()
		age0, reason0, _ := strings.Cut(first, ": ")
		age, reason, _ := strings.Cut(now, ": ")
		if reason != reason0 || age == age0 {
			return fmt.Sprintf("readyz %q, first %q: want the same reason, a later age", now, first)
		}
		return ""
	})
}

// A leader that shuts down cleanly (Close, SIGTERM) resigns in the log,
// and a standby takes over at once — after its stagger, not after
// lease_timeout as when a leader dies (newuser2 #6). The standby still
// fences: it promotes as in any takeover.
func TestLeaderHandsOverOnShutdown(t *testing.T) {
	e := newEnvBrokers(t, map[string]int32{"orders": 1}, 3)
	useKafkaState(t, e)
	e.cfg.Replica.BeatInterval, e.cfg.Replica.LeaseTimeout = 200*time.Millisecond, 4*time.Second
	s := startReplicas(t, e, 3)
	first := s.awaitLeader(t)
	stopped := time.Now()
	s.stop(t, first)
	next := s.awaitLeader(t)
	took := time.Since(stopped)
	t.Logf("hand-over: %s from the leader's Close to a new leader serving (lease_timeout %s)", took, e.cfg.Replica.LeaseTimeout)
	if took >= e.cfg.Replica.LeaseTimeout {
		t.Fatalf("the hand-over took %s, not less than lease_timeout %s: the standbys waited for the lease", took, e.cfg.Replica.LeaseTimeout)
	}
	if e.logs.FilterMessage("coordinator replica resigned: a standby takes over now").Len() != 1 {
		t.Fatal("the leader did not log its resignation")
	}
	// The new leader's own takeover, after the stop. Not a count of
	// takeovers: two standbys may both take over (the later fences the
	// earlier, awaitLeader), when the first's barrier reaches the other
	// later than their staggers differ (500 ms between replica-0's and
	// replica-1's) — and at the start, too.
	id := s.replicas[next].ID()
	tookOver := e.logs.FilterMessageSnippet("took over: fenced").FilterField(zap.String("replica", id)).
		Filter(func(e observer.LoggedEntry) bool { return e.Time.After(stopped) })
	if tookOver.Len() == 0 {
		t.Fatalf("the new leader (%s) did not take over by fencing: %v", id, e.logs.FilterMessageSnippet("took over").All())
	}
}

// Kafka gone altogether (the cluster closed: connections refused): the
// leader steps down, its /readyz says the state log is unreachable and
// why, with a live age, and Close still ends it within shutdown_timeout
// (newuser2 #0a's own scenario: the Kafka fleet stopped under the stack).
func TestLeaderWithKafkaGoneSaysWhyAndStops(t *testing.T) {
	e := newEnvBrokers(t, map[string]int32{"orders": 1}, 3)
	useKafkaState(t, e)
	s := startReplicas(t, e, 1)
	s.awaitLeader(t)
	h := s.harness(0)
	e.kafka.Close()
	eventually(t, func() string {
		status, body, _ := h.do(t, "GET", "/readyz", "", nil)
		if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "the state log (Kafka) is unreachable: ") {
			return fmt.Sprintf("readyz %d %s", status, body)
		}
		return ""
	})
	start := time.Now()
	closed := make(chan struct{})
	go func() { s.stop(t, 0); close(closed) }()
	select {
	case <-closed:
		t.Logf("leader with Kafka gone stopped in %s", time.Since(start))
	case <-time.After(e.cfg.ShutdownTimeout):
		t.Errorf("the leader with Kafka gone still runs %s after Close", e.cfg.ShutdownTimeout)
		<-closed
		t.FailNow()
	}
}
