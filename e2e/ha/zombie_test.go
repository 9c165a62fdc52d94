package ha

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
)

// queuedCall is a request written to a paused replica's socket: the
// kernel accepted the connection and holds the bytes; the replica reads
// them when it resumes, still believing it leads.
type queuedCall struct {
	what   string
	status int
	body   []byte
	err    error
}

// queueAt sends a request to url and returns once it was written (the
// answer comes on the channel).
func queueAt(t *testing.T, what, method, url, bearer string, in any) <-chan queuedCall {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	wrote := make(chan struct{})
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { close(wrote) },
	})
	ctx, cancel := context.WithTimeout(ctx, harness.Wait)
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	done := make(chan queuedCall, 1)
	go func() {
		defer cancel()
		// A client of its own: no connection shared with the parts' calls.
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err != nil {
			done <- queuedCall{what: what, err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- queuedCall{what: what, status: resp.StatusCode, body: b, err: err}
	}()
	select {
	case <-wrote:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: request not written to the paused replica", what)
	}
	return done
}

// TestZombieLeaderIsNotHonoured pauses the leading replica (SIGSTOP),
// lets a standby take over and move partition p from member a to b at
// epochs the paused one never saw, and queues requests at the paused
// one: a sync poll asking for a snapshot (which from its memory would
// carry p's fence below the one the gateways hold, and a's capability
// valid again), and an admin lease of p to a holder outside the group
// (a grant, and a revocation of the holder it thinks p has). Then it
// resumes it. Believing it leads, it takes both, but answers neither
// with anything it could not persist: no 200 leaves it, the gateways
// keep refusing a's fenced capability, it steps down fenced, and every
// checker holds. (Today its loop's first persist after the pause fails
// fenced and stops the loop before it reads the poll, so both are
// answered 503; were the poll answered from memory first, the log's
// confirmation — store.WriteMark — withholds it: the simulation's
// StaleResets.)
func TestZombieLeaderIsNotHonoured(t *testing.T) {
	t.Parallel()
	const group = "ha-zombie-answers"
	// As TestZombieLeader: a write in flight at SIGSTOP gets its outcome
	// from the broker (fenced), not from its own timeout.
	c := startHA(t, group, nil, func(cfg *coordinator.Config) { cfg.KafkaState.Timeout = 5 * time.Minute })
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group, PrintSecrets: true})
	c.WaitSettled(t, group, 1)
	c.WaitFlowing(t, group, 100)

	zombie := leaderAmong(t, c)
	since := harness.Now()
	zombie.Pause(t)
	next := leaderAmong(t, c, zombie)
	heartbeatsAfter(t, c, since, a)
	b := c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	own := c.WaitSettled(t, group, 2)
	p := own[b.MemberID()][0]
	fenced := a.Capabilities()[p] // a's last capability of p: fenced, not expired yet
	v, err := partitionView(c, group, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s paused; %s leads and moved partition %d to b at epoch %d", zombie.Name, next.Name, p, v.Epoch)

	calls := []<-chan queuedCall{
		// A gateway it knows (no instance nonce: not a conflict), so
		// that answering needs no write of the poll's own.
		queueAt(t, "sync poll for a snapshot", http.MethodGet, zombie.URL+"/v1/sync?gateway="+c.Gateways()[0].ID+"&after=0&wait_ms=0", c.SyncToken, nil),
		queueAt(t, "admin lease", http.MethodPost, zombie.URL+partitionPath(group, c.Topic(), p, "lease"), c.AdminToken,
			coordinator.LeaseRequest{Holder: "zombie-job", TTLMs: 60_000}),
	}
	resumed := harness.Now()
	zombie.Resume(t)
	why := stepDown(t, c, zombie, resumed)
	t.Logf("%s resumed and stepped down after %s: %s", zombie.Name, time.Duration(harness.Now()-resumed), why.Reason)
	for _, ch := range calls {
		r := <-ch
		t.Logf("%s at the zombie: %d %.200s %v", r.what, r.status, r.body, r.err)
		if r.status == http.StatusOK {
			t.Errorf("%s answered 200 by the deposed replica: %.500s", r.what, r.body)
			var sync api.SyncResponse
			if json.Unmarshal(r.body, &sync) == nil {
				for _, f := range sync.Fences {
					if f.Group == group && f.Partition == p && f.Epoch < v.Epoch {
						t.Errorf("its snapshot fences partition %d at %d, below the new leader's %d", p, f.Epoch, v.Epoch)
					}
				}
			}
			var lease coordinator.LeaseResponse
			if json.Unmarshal(r.body, &lease) == nil && lease.Capability != "" {
				mustBeRefused(t, c, p, lease.Capability, "the zombie's lease")
			}
		}
	}
	mustBeRefused(t, c, p, fenced, "a's fenced")
	if again := leaderAmong(t, c); again != next {
		t.Errorf("after the zombie resumed %s leads, want %s still", again.Name, next.Name)
	}
	c.WaitFlowing(t, group, 100)
	s := c.Finish(t, prod, group)
	no503(t, s, since)
}

// TestLeaderPausedReleaseLands: member a is told to give three
// partitions to b; its release commits are held until the leader is
// paused (SIGSTOP), so they go to the silent replica. They must still
// land — at the standby that takes over — within the SDK's
// request_timeout (10 s, the default): a clean handoff, nothing read
// twice. Before, one commit attempt at a silent replica took the whole
// request_timeout, so the release failed unanswered and the handoff fell
// back to handoff_timeout with the uncommitted records read again.
func TestLeaderPausedReleaseLands(t *testing.T) {
	t.Parallel()
	const group = "ha-paused-release"
	c := startHA(t, group, nil, func(cfg *coordinator.Config) { cfg.KafkaState.Timeout = 5 * time.Minute })
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group, RequestTimeout: 10 * time.Second})
	c.WaitSettled(t, group, 1)
	c.WaitFlowing(t, group, 100)

	releaseA := a.Hold("commit")
	defer releaseA()
	started := harness.Now()
	b := c.StartMember(t, harness.MemberOptions{Name: "b", Group: group, RequestTimeout: 10 * time.Second})
	moving := c.WaitRevoked(t, a.MemberID(), started, 3)
	paused := leaderAmong(t, c)
	since := harness.Now()
	paused.Pause(t)
	releaseA()
	next := leaderAmong(t, c, paused)
	own := c.WaitSettled(t, group, 2)
	t.Logf("%s paused with a's release of %v held, %s took over; settled %s after the pause", paused.Name, moving, next.Name, time.Duration(harness.Now()-since))
	for _, k := range moving {
		if !slices.Contains(own[b.MemberID()], k.Partition) {
			t.Errorf("%s owned by %v, want b", k, own)
		}
	}
	resumed := harness.Now()
	paused.Resume(t)
	stepDown(t, c, paused, resumed)
	s := c.Finish(t, prod, group)
	for _, k := range moving {
		if !slices.ContainsFunc(s.Commits, func(cm harness.Commit) bool {
			return cm.Key == k && cm.Member == a.MemberID() && cm.Release && cm.Accepted()
		}) {
			t.Errorf("%s: a's release commit never accepted (the handoff fell back to its timeout)", k)
		}
	}
	no503(t, s, since)
}
