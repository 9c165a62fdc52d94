package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/internal/stack"
)

// produceEvery is the producer's interval per partition.
const produceEvery = 20 * time.Millisecond

// haTiming leaves room for a takeover (the replicas' lease is 1 s, beats
// every 200 ms, plus a stagger) inside every client timeout: members keep
// their sessions and gateways stay in sync across it.
func haTiming() harness.Timing {
	return harness.Timing{
		CapabilityLease: 8 * time.Second, HeartbeatWait: time.Second, SessionTimeout: 5 * time.Second,
		HandoffTimeout: 6 * time.Second, GatewayTimeout: 8 * time.Second, MaxClockSkew: 500 * time.Millisecond,
		SyncWait: 500 * time.Millisecond, SyncTimeout: 5 * time.Second, Leeway: time.Second,
	}
}

// clientID is replica i's Kafka client id: what a KafkaCut cuts.
func clientID(i int) string { return fmt.Sprintf("capgate-coordinator-%d", i+1) }

// startHA starts three coordinator replicas (processes, state: kafka),
// two gateway processes and a 3-broker kfake, its brokers listening
// through cut (may be nil), with group traced; tune edits every
// replica's configuration.
func startHA(t testing.TB, group string, cut *stack.KafkaCut, tune ...func(*coordinator.Config)) *harness.Cluster {
	t.Helper()
	return startHAWith(t, group, 6, func(opts *harness.Options) {
		if cut != nil {
			opts.KafkaOptions = append(opts.KafkaOptions, cut.Option())
		}
	}, tune...)
}

// startHAWith is startHA with partitions partitions in the topic; edit
// (may be nil) changes the harness options, tune every replica's
// configuration.
func startHAWith(t testing.TB, group string, partitions int32, edit func(*harness.Options), tune ...func(*coordinator.Config)) *harness.Cluster {
	t.Helper()
	opts := harness.Options{
		Partitions: partitions, Brokers: 3, Gateways: 2, Coordinators: 3, Groups: []string{group},
		CoordinatorProcess: true, GatewayProcesses: true, Binaries: binaries, Timing: haTiming(),
		CoordinatorConfig: func(i int, cfg *coordinator.Config) {
			cfg.Broker.ClientID = clientID(i)
			for _, f := range tune {
				f(cfg)
			}
		},
	}
	if edit != nil {
		edit(&opts)
	}
	return harness.Start(t, opts)
}

// startReading starts a producer writing each partition every `every`
// and members (in group unless they name one), and waits until the
// group settled with all of them and half the partitions are read: the
// steady state a chaos test breaks.
func startReading(t *testing.T, c *harness.Cluster, group string, every time.Duration, members ...harness.MemberOptions) (*harness.Producer, []*harness.Member) {
	t.Helper()
	prod := c.StartProducer(t, every)
	started := make([]*harness.Member, len(members))
	for i, o := range members {
		if o.Group == "" {
			o.Group = group
		}
		started[i] = c.StartMember(t, o)
	}
	c.WaitSettled(t, group, len(members))
	c.WaitFlowing(t, group, int(c.Partitions())/2)
	return prod, started
}

// killOrPause runs test twice, in parallel: with the leading replica
// failing by kill -9 ("kill"), and by SIGSTOP ("pause").
func killOrPause(t *testing.T, test func(t *testing.T, name string, pause bool)) {
	for _, pause := range []bool{false, true} {
		name := "kill"
		if pause {
			name = "pause"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, name, pause)
		})
	}
}

// leaderAmong waits until one of the running replicas, other than those
// in skip, says it leads, and returns it. Each replica is asked on its
// own with a short deadline: a paused one must not hold the question.
func leaderAmong(t testing.TB, c *harness.Cluster, skip ...*harness.Coordinator) *harness.Coordinator {
	t.Helper()
	var found *harness.Coordinator
	harness.Eventually(t, harness.Wait, "a replica leads", func() (bool, string) {
		var roles []string
		for _, co := range c.Replicas {
			if slices.Contains(skip, co) || co.Process() == nil {
				continue
			}
			role, _, err := roleOf(c, co)
			roles = append(roles, fmt.Sprintf("%s %s %v", co.Name, role, err))
			if err == nil && role == leader.Leader.String() {
				found = co
				return true, ""
			}
		}
		return false, strings.Join(roles, "; ")
	})
	return found
}

// heartbeatsAfter waits until every member had a heartbeat answered 200
// after since: the new leader serves them (no rejoin needed).
func heartbeatsAfter(t testing.TB, c *harness.Cluster, since harness.Time, members ...*harness.Member) {
	t.Helper()
	harness.Eventually(t, harness.Wait, "members heartbeat the new leader", func() (bool, string) {
		s := c.Log.Snapshot()
		for _, m := range members {
			ok := slices.ContainsFunc(s.Calls, func(call harness.Call) bool {
				return call.Member == m.MemberID() && call.Op == "heartbeat" && call.Status == 200 && call.Sent >= since
			})
			if !ok {
				return false, m.Name + " has no heartbeat answered since"
			}
		}
		return true, ""
	})
}

// no503 fails t for every fetch a gateway answered 503 to a member since
// since: a single replica's failure must never stop a fetch.
func no503(t *testing.T, s harness.Snapshot, since harness.Time) {
	t.Helper()
	n, total := 0, 0
	for _, f := range s.ClientFetches {
		if f.Sent < since {
			continue
		}
		total++
		if f.Status == 503 {
			n++
			if n <= 5 {
				t.Errorf("%s: fetch of %s at %s answered 503 %s", f.Consumer, f.Key, f.Gateway, f.Code)
			}
		}
	}
	if n > 0 {
		t.Errorf("%d of %d fetches since the fault answered 503", n, total)
	}
	if total == 0 {
		t.Error("no fetch since the fault: nothing was measured")
	}
	t.Logf("%d fetches since the fault, none answered 503", total)
}

// log503 logs how many fetches since since were answered 503: a gateway
// that could not sync for sync_timeout across a takeover refuses
// out_of_sync, rightly — on a loaded machine (the whole package's
// clusters at once) a takeover can outlast it. For the tests whose
// subject is the checkers, not the takeover's speed (no503 asserts it).
func log503(t *testing.T, s harness.Snapshot, since harness.Time) {
	t.Helper()
	n, total := 0, 0
	for _, f := range s.ClientFetches {
		if f.Sent >= since {
			total++
			if f.Status == http.StatusServiceUnavailable {
				n++
			}
		}
	}
	t.Logf("%d of %d fetches since the fault answered 503", n, total)
}

// stepDown waits until replica co logged that it left the lead and
// returns why.
func stepDown(t testing.TB, c *harness.Cluster, co *harness.Coordinator, since harness.Time) harness.RoleChange {
	t.Helper()
	var got harness.RoleChange
	harness.Eventually(t, harness.Wait, co.Name+" steps down", func() (bool, string) {
		for _, r := range c.RoleChanges() {
			if r.Part == co.Name && r.At >= since && r.From == leader.Leader.String() && r.To == leader.SteppingDown.String() {
				got = r
				return true, ""
			}
		}
		return false, fmt.Sprintf("role changes: %v", c.RoleChanges())
	})
	return got
}

// roleOf asks replica co's /readyz (within a second: a paused replica
// must not hold the question) what it is and whom it names: "leader",
// "follower" naming the leader's URL, or the role a 503 names
// (candidate, stepping-down).
func roleOf(c *harness.Cluster, co *harness.Coordinator) (role, hint string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, body, err := stack.DoJSON(ctx, c.HTTP(), http.MethodGet, co.URL+"/readyz", "", nil, nil)
	if err != nil {
		return "", "", err
	}
	var ready struct {
		Role   string `json:"role"`
		Leader string `json:"leader"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &ready); err != nil {
		return "", "", fmt.Errorf("%s /readyz: %s", co.Name, body)
	}
	if ready.Error != nil {
		role, _, _ := strings.Cut(ready.Error.Message, ":")
		return role, "", nil
	}
	return ready.Role, ready.Leader, nil
}

// gapBetween is consumer's longest time within [from, to] without a
// fetch answered 200 (answer to answer, the edges included).
func gapBetween(s harness.Snapshot, consumer string, from, to harness.Time) time.Duration {
	var dones []harness.Time
	for _, f := range s.ClientFetches {
		if f.Consumer == consumer && f.Status == 200 && f.Done >= from && f.Done <= to {
			dones = append(dones, f.Done)
		}
	}
	slices.Sort(dones)
	last, gap := from, time.Duration(0)
	for _, d := range dones {
		gap = max(gap, time.Duration(d-last))
		last = d
	}
	return max(gap, time.Duration(to-last))
}

// failReplica kills (-9) or pauses (SIGSTOP) replica co.
func failReplica(t testing.TB, co *harness.Coordinator, pause bool) {
	t.Helper()
	if pause {
		co.Pause(t)
	} else {
		co.Kill(t)
	}
}

// bringBack brings replica co back after failReplica: a paused one resumes and
// steps down (the replica that took over leads), a killed one restarts
// (as a follower).
func bringBack(t testing.TB, c *harness.Cluster, co *harness.Coordinator, pause bool) {
	t.Helper()
	if pause {
		resumed := harness.Now()
		co.Resume(t)
		stepDown(t, c, co, resumed)
	} else {
		co.Restart(t)
	}
}

// waitGone waits until member id is no longer a member of group.
func waitGone(t testing.TB, c *harness.Cluster, group, id, what string) {
	t.Helper()
	harness.Eventually(t, harness.Wait, what, func() (bool, string) {
		d, err := c.Describe(group)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range d.Members {
			if m.ID == id {
				return false, "still a member"
			}
		}
		return true, ""
	})
}

// noOverloaded fails t for each coordinator call of a member answered
// 503 overloaded: its address held every connection the coordinator
// allows one (max_connections_per_address), and every client of that
// address was refused.
func noOverloaded(t *testing.T, s harness.Snapshot) {
	t.Helper()
	overloaded := 0
	for _, call := range s.Calls {
		if call.Code == "overloaded" {
			if overloaded++; overloaded <= 3 {
				t.Errorf("%s's %s at %s answered %d overloaded", call.Consumer, call.Op, call.Sent, call.Status)
			}
		}
	}
	if overloaded > 0 {
		t.Errorf("%d coordinator calls of the members answered 503 overloaded", overloaded)
	}
}

// scrapeMetric reads one unlabelled metric from replica co's /metrics
// (a standby serves its replica metrics too).
func scrapeMetric(ctx context.Context, c *harness.Cluster, co *harness.Coordinator, name string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, co.URL+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.HTTP().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return 0, err
	case resp.StatusCode != http.StatusOK:
		return 0, fmt.Errorf("%s /metrics: %d", co.Name, resp.StatusCode)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", co.Name, name)
}
