package ha

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
)

// connectionsOpen is a coordinator's count of its open HTTP connections.
const connectionsOpen = "capgate_coordinator_http_connections_open"

// TestLeaderPausedUnderCommitsOfManyPartitions: one member holds 2,000
// partitions (capability_lease 3 s) and commits them in the background
// (CommitAsync every 100 ms) when the leading replica is paused
// (SIGSTOP); its heartbeats, held by the frozen leader, are kept back
// until its capabilities expired, so its next commit reaches the replica
// that took over with expired capabilities: each chunk of 500 is refused
// token_expired and split into commits of one partition. Those go
// session.MaxSplitCommitsInFlight at a time: the member never has more
// than a few dozen commits in flight, no call of its is refused 503
// overloaded, no fetch is refused 503 (the gateways' sync polls, from the
// same loopback address, are not starved), nothing is lost and every
// checker holds. Before, the split sent 2,000 commits at once: 1,732 in
// flight, 441 connections open at the new leader, 124 refused
// overloaded, and 43,837 fetches refused 503 out_of_sync, no record
// delivered for 30 s.
func TestLeaderPausedUnderCommitsOfManyPartitions(t *testing.T) {
	t.Parallel()
	const group, partitions = "ha-commit-storm", 2000
	timing := haTiming()
	timing.CapabilityLease = 3 * time.Second
	c := harness.Start(t, harness.Options{
		Partitions: partitions, Brokers: 3, Gateways: 2, Coordinators: 3, Groups: []string{group},
		CoordinatorProcess: true, GatewayProcesses: true, Binaries: binaries, Timing: timing,
		CoordinatorConfig: func(i int, cfg *coordinator.Config) {
			cfg.Broker.ClientID = clientID(i)
		},
	})
	prod := c.StartProducer(t, 5*time.Second)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group})
	c.WaitSettled(t, group, 1)
	c.WaitFlowing(t, group, partitions)

	lead := leaderAmong(t, c)
	peaks := sampleConnections(t, c, lead)
	at := harness.Now()
	// No capability is renewed from now on (renewals come in heartbeat
	// answers), and the commits wait: they reach the new leader with
	// every capability expired.
	releaseBeats, releaseCommits := a.Hold("heartbeat"), a.Hold("commit")
	defer releaseBeats()
	defer releaseCommits()
	expired := time.Now().Add(timing.CapabilityLease + timing.Leeway)
	failReplica(t, lead, true)
	c.DropSync()
	next := leaderAmong(t, c, lead)
	t.Logf("%s paused, %s took over after %s", lead.Name, next.Name, harness.Since(at).Round(time.Millisecond))
	// Tokens expire by the clock: this wait is for the instant every
	// capability the member holds is past its exp and leeway.
	<-time.After(time.Until(expired))
	releaseCommits()
	releaseBeats()
	t.Logf("commits and heartbeats held %s, until every capability expired", harness.Since(at).Round(time.Millisecond))
	committedAfter(t, c, at)
	c.WaitFlowing(t, group, partitions)
	peak := peaks()
	bringBack(t, c, lead, true)
	s := c.Finish(t, prod, group)
	inFlight := mostInFlight(s.Calls)
	t.Logf("open connections at each replica, most seen: %v", peak)
	t.Logf("coordinator calls in flight at once, at most: %s", inFlight)
	t.Logf("calls since the pause: %s", callsSince(s.Calls, at))
	if !strings.Contains(callsSince(s.Calls, at), "commit 401 token_expired") {
		t.Error("no commit was refused token_expired: the split was not exercised")
	}
	if n := mostInFlightOf(s.Calls, "a", "commit"); n > commitsInFlightMax {
		t.Errorf("%d commits in flight at once, want at most %d", n, commitsInFlightMax)
	}
	noOverloaded(t, s)
	no503(t, s, at)
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

// commitsInFlightMax: a member's commits in flight at once — the lane's
// chunks (4 for 2,000 partitions) and the split commits
// (session.MaxSplitCommitsInFlight) or releases
// (session.MaxReleasesInFlight), each with up to 2 hedged attempts of
// its own (driver's hedgedMax).
const commitsInFlightMax = (4 + 8 + 8) * 3

// mostInFlightOf is the most calls of op by consumer in flight at once.
func mostInFlightOf(calls []harness.Call, consumer, op string) int {
	var mine []harness.Call
	for _, c := range calls {
		if c.Consumer == consumer && c.Op == op {
			mine = append(mine, c)
		}
	}
	s := mostInFlight(mine)
	if s == "" {
		return 0
	}
	n, _ := strconv.Atoi(s[strings.LastIndexByte(s, ' ')+1:])
	return n
}

// committedAfter waits until a commit sent after at was answered 200.
func committedAfter(t *testing.T, c *harness.Cluster, at harness.Time) {
	t.Helper()
	harness.Eventually(t, harness.Wait, "a commit answered after the takeover", func() (bool, string) {
		for _, call := range c.Log.Snapshot().Calls {
			if call.Op == "commit" && call.Sent > at && call.Status == http.StatusOK {
				return true, ""
			}
		}
		return false, "none yet"
	})
}

// callsSince counts the calls sent since at by op and outcome.
func callsSince(calls []harness.Call, at harness.Time) string {
	n := map[string]int{}
	for _, c := range calls {
		if c.Sent >= at {
			n[fmt.Sprintf("%s %d %s", c.Op, c.Status, c.Code)]++
		}
	}
	var out []string
	for k, v := range n {
		out = append(out, fmt.Sprintf("%s: %d", k, v))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// sampleConnections reads the open connections of every replica but
// skip every 50 ms until the returned function is called, which returns
// the most each had.
func sampleConnections(t *testing.T, c *harness.Cluster, skip *harness.Coordinator) func() map[string]float64 {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	peak := map[string]float64{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, co := range c.Replicas {
				if co == skip {
					continue
				}
				if v, err := scrapeMetric(ctx, c, co, connectionsOpen); err == nil {
					mu.Lock()
					peak[co.Name] = max(peak[co.Name], v)
					mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	stop := func() map[string]float64 {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
	t.Cleanup(func() { stop() })
	return stop
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
