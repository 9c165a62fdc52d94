package faults

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/e2e/harness"
)

// TestGatewayKillRestart: a gateway process is killed with SIGKILL; the
// consumers fail over to the other gateway (they keep consuming, and
// through it only). It is restarted on the same address while its way to
// the coordinator is still blackholed: until its first sync it answers
// /readyz and every fetch with 503 not_ready. Once healed it becomes
// ready, takes part in a handoff (it acknowledges the fences of the
// newcomer's partitions), serves the newcomer, who fetches through it
// alone, and the checkers hold.
func TestGatewayKillRestart(t *testing.T) {
	needSignals(t)
	t.Parallel()
	const group = "gwkill"
	c := harness.Start(t, harness.Options{Groups: []string{group}, Binaries: binaries, GatewayProcesses: true})
	prod := c.StartProducer(t, produceEvery)
	c.StartMember(t, harness.MemberOptions{Name: "a", Group: group})
	c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	waitSettled(t, c, group, 2)
	waitFlowing(t, c, group, 200)

	victim, other := c.Gateways()[0], c.Gateways()[1]
	victim.Kill()
	killed := harness.Now()
	waitFlowing(t, c, group, 200) // through the other gateway
	failedOver := harness.Now()

	victim.Proxy.Blackhole()
	c.Log.AddFault("blackhole", victim.ID)
	victim.Restart(t)
	capability := sharedCapability(t, c, 0)
	harness.Eventually(t, wait, victim.ID+" serving HTTP again", func() (bool, string) {
		status, err := c.HTTP().Get(victim.URL + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		status.Body.Close()
		return status.StatusCode == http.StatusOK, fmt.Sprint(status.StatusCode)
	})
	checkNotReady(t, c, victim, capability)
	victim.Proxy.Heal()
	c.Log.AddFault("heal", victim.ID)
	victim.WaitReady(t, wait)

	healed := harness.Now()
	// A handoff with the restarted gateway in it; the newcomer fetches
	// through it alone.
	newcomer := c.StartMember(t, harness.MemberOptions{Name: "c", Group: group, Gateways: []string{victim.URL}})
	waitSettled(t, c, group, 3)
	waitFlowing(t, c, group, 200)
	s := finish(t, c, prod, group)
	checkFailedOver(t, s, group, other, killed, failedOver)
	checkRestartedServes(t, s, group, victim, newcomer.MemberID(), healed)
}

// checkFailedOver: the members' successful fetches sent between the
// kill and the moment records flowed again went through the other
// gateway only, and there were some. Sent, not answered, after the kill:
// an answer the victim wrote before it died can be read after Kill
// returned (a member slow to read it, on a loaded machine).
func checkFailedOver(t *testing.T, s harness.Snapshot, group string, other *harness.Gateway, killed, flowing harness.Time) {
	t.Helper()
	through := map[string]int{}
	for _, f := range s.ClientFetches {
		if f.Key.Group == group && f.Status == http.StatusOK && f.Sent > killed && f.Done <= flowing {
			through[f.Gateway]++
		}
	}
	if through[other.URL] == 0 || len(through) != 1 {
		t.Errorf("fetches answered 200 between the kill and the failover, by gateway: %v; want them all through %s", through, other.URL)
	}
}

// checkRestartedServes: after the heal the restarted gateway acknowledged
// a sync answer fencing the newcomer's partitions (it took part in the
// handoff), and served the newcomer's fetches.
func checkRestartedServes(t *testing.T, s harness.Snapshot, group string, g *harness.Gateway, newcomer string, healed harness.Time) {
	t.Helper()
	moved := partitionsOf(grantsTo(s, newcomer, healed))
	var fencedSeq uint64
	for _, a := range s.SyncAnswers {
		for _, f := range a.Fences {
			if a.Gateway == g.ID && a.At >= healed && f.Group == group && slices.Contains(moved, f.Partition) && fencedSeq == 0 {
				fencedSeq = a.Seq
			}
		}
	}
	acked := false
	for _, p := range s.SyncPolls {
		acked = acked || (p.Gateway == g.ID && p.Forwarded != 0 && fencedSeq != 0 && p.After >= fencedSeq)
	}
	served := 0
	for _, f := range s.Fetches {
		if f.Gateway == g.ID && f.OK() && f.Key.Group == group && f.Holder == newcomer && f.Start > healed {
			served++
		}
	}
	switch {
	case len(moved) == 0:
		t.Errorf("the newcomer was granted nothing after the heal")
	case !acked:
		t.Errorf("%s never acknowledged a fence of the newcomer's partitions %v (fenced at seq %d)", g.ID, moved, fencedSeq)
	case served == 0:
		t.Errorf("%s served no fetch of the newcomer %s after its restart", g.ID, newcomer)
	default:
		t.Logf("%s acknowledged the fences of %v (seq %d) and served the newcomer %d fetches", g.ID, moved, fencedSeq, served)
	}
}

// checkNotReady: a gateway that cannot sync answers /readyz and fetches
// with 503 not_ready, checked a few times over a second.
func checkNotReady(t *testing.T, c *harness.Cluster, g *harness.Gateway, capability string) {
	t.Helper()
	for range 5 {
		if status, err := g.Ready(); status != http.StatusServiceUnavailable {
			t.Errorf("%s /readyz before its first sync: %d %v, want 503", g.ID, status, err)
		}
		status, contentType, body := rawFetch(t, c, g.URL, capability, 0, 0)
		if code := errorCode(t, contentType, body); status != http.StatusServiceUnavailable || code != api.CodeNotReady {
			t.Errorf("%s fetch before its first sync: %d %s, want 503 not_ready", g.ID, status, code)
		}
		time.Sleep(200 * time.Millisecond) // spread the checks; each is a fact, not a wait
	}
}

// TestGatewayCutOff: the network between one gateway and the coordinator
// goes silent (its proxy is blackholed). Within sync_timeout the gateway
// refuses every fetch with 503 out_of_sync on its own; a handoff started
// meanwhile completes once the gateway has been silent for
// gateway_timeout, without its ack. After the heal it resyncs and serves
// again, and the checkers hold — in particular no two members read a
// partition at once, through the cut-off gateway or not.
func TestGatewayCutOff(t *testing.T) {
	t.Parallel()
	const group = "cutoff"
	c := harness.Start(t, harness.Options{Groups: []string{group}, Binaries: binaries})
	prod := c.StartProducer(t, produceEvery)
	c.StartMember(t, harness.MemberOptions{Name: "a", Group: group})
	c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	waitSettled(t, c, group, 2)
	waitFlowing(t, c, group, 200)

	cut := c.Gateways()[0]
	capability := sharedCapability(t, c, 0)
	cut.Proxy.Blackhole()
	c.Log.AddFault("blackhole", cut.ID)
	blackholed := harness.Now()
	harness.Eventually(t, wait, cut.ID+" self-fenced", func() (bool, string) {
		status, err := cut.Ready()
		return status == http.StatusServiceUnavailable, fmt.Sprintf("/readyz %d %v", status, err)
	})
	fenced := harness.Now()
	status, contentType, body := rawFetch(t, c, cut.URL, capability, 0, 0)
	if code := errorCode(t, contentType, body); status != http.StatusServiceUnavailable || code != api.CodeOutOfSync {
		t.Errorf("fetch at the cut-off gateway: %d %s, want 503 out_of_sync", status, code)
	}

	newcomer := c.StartMember(t, harness.MemberOptions{Name: "c", Group: group})
	waitSettled(t, c, group, 3)
	granted := harness.Now()
	waitFlowing(t, c, group, 100)
	cut.Proxy.Heal()
	c.Log.AddFault("heal", cut.ID)
	healed := harness.Now()
	cut.WaitReady(t, wait)
	waitFlowing(t, c, group, 100)
	s := finish(t, c, prod, group)

	checkCutOff(t, c, s, cut, newcomer.MemberID(), fenced, healed)
	t.Logf("%s self-fenced %v after the blackhole (sync_timeout %v); handoff settled %v after it (gateway_timeout %v)",
		cut.ID, fenced.Sub(blackholed).Round(time.Millisecond), c.Timing().SyncTimeout,
		granted.Sub(blackholed).Round(time.Millisecond), c.Timing().GatewayTimeout)
}

// checkCutOff: the newcomer was granted while the gateway was cut off, no
// sooner than gateway_timeout after the coordinator last heard from it,
// and the gateway served nothing while self-fenced.
func checkCutOff(t *testing.T, c *harness.Cluster, s harness.Snapshot, cut *harness.Gateway, newcomer string, fenced, healed harness.Time) {
	t.Helper()
	var heard harness.Time // the cut-off gateway's last poll that reached the coordinator
	for _, p := range s.SyncPolls {
		if p.Gateway == cut.ID && p.Forwarded != 0 && p.Forwarded < healed {
			heard = max(heard, p.Forwarded)
		}
	}
	gs := grantsTo(s, newcomer, 0)
	switch {
	case len(gs) == 0 || gs[0].At > healed:
		t.Errorf("the newcomer got no partition while %s was cut off (grants %v)", cut.ID, partitionsOf(gs))
	case gs[0].At.Sub(heard) <= c.Timing().GatewayTimeout:
		t.Errorf("the newcomer was granted %s at %s, only %v after %s was last heard from (gateway_timeout %v)",
			gs[0].Key, gs[0].At, gs[0].At.Sub(heard), cut.ID, c.Timing().GatewayTimeout)
	default:
		t.Logf("first grant to the newcomer %v after %s was last heard from (gateway_timeout %v)",
			gs[0].At.Sub(heard).Round(time.Millisecond), cut.ID, c.Timing().GatewayTimeout)
	}
	for _, f := range s.Fetches {
		if f.Gateway == cut.ID && f.Start > fenced && f.Start < healed && f.OK() {
			t.Errorf("%s served %s@ep%d at %s while self-fenced", cut.ID, f.Key, f.Epoch, f.Start)
		}
	}
}

// TestGatewayPausedBeyondTimeout: a gateway process is stopped (SIGSTOP)
// with fetches in flight for longer than gateway_timeout, so the
// coordinator counts it safe without its ack and completes a handoff;
// then it is continued. The fetches it had admitted before the pause
// must not be served under the capabilities the handoff fenced (it has
// not synced for sync_timeout: 503; once resynced: 409), and the checkers
// hold — no two members read a partition at once.
//
// Fetches in flight are made certain, not hoped for: the test sends one
// fetch per partition with the holder's own capability at offset 0 and
// kfake holds each at the broker (a control function on Fetch) until the
// gateway has been continued.
func TestGatewayPausedBeyondTimeout(t *testing.T) {
	needSignals(t)
	t.Parallel()
	const group = "gwpause"
	// Capabilities outlive the pause: what refuses the frozen fetches is
	// the gateway's sync timeout or the fence, not their expiry.
	timing := harness.DefaultTiming()
	timing.CapabilityLease = 30 * time.Second
	c := harness.Start(t, harness.Options{Groups: []string{group}, Binaries: binaries, GatewayProcesses: true, Timing: timing})
	prod := c.StartProducer(t, produceEvery)
	a := c.StartMember(t, harness.MemberOptions{Name: "a", Group: group, PrintSecrets: true})
	b := c.StartMember(t, harness.MemberOptions{Name: "b", Group: group, PrintSecrets: true})
	waitSettled(t, c, group, 2)
	waitFlowing(t, c, group, 200)

	paused := c.Gateways()[0]
	caps := a.Capabilities()
	maps.Copy(caps, b.Capabilities())
	frozen := freezeFetches(t, c, paused, caps)
	paused.Signal(t, syscall.SIGSTOP)
	stopped := harness.Now()
	newcomer := c.StartMember(t, harness.MemberOptions{Name: "c", Group: group})
	waitSettled(t, c, group, 3) // only once the paused gateway counts as silent
	settled := harness.Now()
	time.Sleep(max(0, c.Timing().GatewayTimeout+time.Second-settled.Sub(stopped))) // the fault: paused past gateway_timeout
	paused.Signal(t, syscall.SIGCONT)
	continued := harness.Now()
	answers := frozen.release()
	paused.WaitReady(t, wait)
	waitFlowing(t, c, group, 200)
	s := finish(t, c, prod, group)

	moved := partitionsOf(grantsTo(s, newcomer.MemberID(), stopped))
	checkFrozenAnswers(t, answers, moved)
	late := map[string]int{}
	for _, f := range s.Fetches {
		if f.Gateway == paused.ID && f.Start < stopped && f.End > continued {
			late[f.Outcome]++
			if f.OK() && slices.Contains(moved, f.Key.Partition) && f.Holder != newcomer.MemberID() {
				t.Errorf("%s served %s@ep%d admitted at %s before the pause, answered at %s after it", paused.ID, f.Key, f.Epoch, f.Start, f.End)
			}
		}
	}
	t.Logf("handoff of %v settled %v into the pause (gateway_timeout %v); fetches frozen across it answered %v",
		moved, settled.Sub(stopped).Round(time.Millisecond), c.Timing().GatewayTimeout, late)
}

// frozenFetches are the test's own fetches held at the broker.
type frozenFetches struct {
	unhold  func()
	answers map[int32]chan rawAnswer
}

// freezeFetches sends one fetch per partition at offset 0 with caps[p]
// through g and returns once kfake holds every one of them at the broker
// (admitted by the gateway, in flight). Only fetches at offset 0 are held:
// the members fetch far beyond it.
func freezeFetches(t *testing.T, c *harness.Cluster, g *harness.Gateway, caps map[int32]string) *frozenFetches {
	t.Helper()
	if len(caps) != int(c.Partitions()) {
		t.Fatalf("capabilities of %d partitions recorded, want %d", len(caps), c.Partitions())
	}
	kafka := c.Kafka.Cluster()
	release := make(chan struct{})
	var mu sync.Mutex
	held := map[int32]bool{}
	kafka.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			for _, p := range tp.Partitions {
				if p.FetchOffset != 0 {
					continue
				}
				mu.Lock()
				held[p.Partition] = true
				mu.Unlock()
				kafka.SleepControl(func() { <-release })
			}
		}
		return nil, nil, false // then served as usual
	})
	f := &frozenFetches{answers: map[int32]chan rawAnswer{}}
	for p, capability := range caps {
		ch := make(chan rawAnswer, 1)
		f.answers[p] = ch
		go func() {
			status, contentType, body := rawFetch(t, c, g.URL, capability, p, 0)
			ch <- rawAnswer{status, contentType, body}
		}()
	}
	harness.Eventually(t, wait, "every test fetch held at the broker", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(held) == len(caps), fmt.Sprintf("%d of %d held", len(held), len(caps))
	})
	f.unhold = sync.OnceFunc(func() { close(release) })
	t.Cleanup(f.unhold)
	return f
}

// release lets the broker answer the held fetches and collects what the
// gateway answered.
func (f *frozenFetches) release() map[int32]rawAnswer {
	f.unhold()
	out := map[int32]rawAnswer{}
	for p, ch := range f.answers {
		out[p] = <-ch
	}
	return out
}

// checkFrozenAnswers: some partition moved, and no fetch frozen across the
// pause under a capability the handoff fenced was answered with records:
// each got 503 out_of_sync or 409 capability_revoked.
func checkFrozenAnswers(t *testing.T, answers map[int32]rawAnswer, moved []int32) {
	t.Helper()
	if len(moved) == 0 {
		t.Fatalf("no partition moved to the newcomer during the pause")
	}
	for _, p := range moved {
		a := answers[p]
		code := api.Code("")
		if a.status != http.StatusOK {
			code = errorCode(t, a.contentType, a.body)
		}
		if a.status == http.StatusOK || (code != api.CodeOutOfSync && code != api.CodeCapabilityRevoked) {
			t.Errorf("frozen fetch of moved partition %d under its fenced capability: %d %s %.200s, want 503 out_of_sync or 409 capability_revoked", p, a.status, code, a.body)
		} else {
			t.Logf("frozen fetch of moved partition %d: %d %s", p, a.status, code)
		}
	}
}
