package faults

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/e2e/harness"
)

// TestGatewayKillRestart: a gateway process is killed with SIGKILL; the
// consumers fail over to the other gateway. It is restarted on the same
// address while its way to the coordinator is still blackholed: until its
// first sync it answers /readyz and every fetch with 503 not_ready. Once
// healed it becomes ready, takes part in a handoff, and the checkers hold.
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

	victim := c.Gateways()[0]
	victim.Kill()
	waitFlowing(t, c, group, 200) // through the other gateway

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

	c.StartMember(t, harness.MemberOptions{Name: "c", Group: group}) // a handoff with the restarted gateway in it
	waitSettled(t, c, group, 3)
	waitFlowing(t, c, group, 200)
	s := finish(t, c, prod, group)
	served := 0
	for _, f := range s.Fetches {
		if f.Gateway == victim.ID && f.OK() && f.Key.Group == group {
			served++
		}
	}
	t.Logf("%s served %d fetches of %s in all", victim.ID, served, group)
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
// then it is continued. The fetches it had admitted before the pause must
// not be served now (it has not synced for sync_timeout: 503), and the
// checkers hold — no two members read a partition at once.
func TestGatewayPausedBeyondTimeout(t *testing.T) {
	needSignals(t)
	t.Parallel()
	const group = "gwpause"
	// Capabilities outlive the pause: what refuses the frozen fetches is
	// the gateway's own sync timeout, not their expiry.
	timing := harness.DefaultTiming()
	timing.CapabilityLease = 30 * time.Second
	c := harness.Start(t, harness.Options{Groups: []string{group}, Binaries: binaries, GatewayProcesses: true, Timing: timing})
	prod := c.StartProducer(t, produceEvery)
	c.StartMember(t, harness.MemberOptions{Name: "a", Group: group})
	c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	waitSettled(t, c, group, 2)
	waitFlowing(t, c, group, 200)

	paused := c.Gateways()[0]
	paused.Signal(t, syscall.SIGSTOP)
	stopped := harness.Now()
	c.StartMember(t, harness.MemberOptions{Name: "c", Group: group})
	waitSettled(t, c, group, 3) // only once the paused gateway counts as silent
	settled := harness.Now()
	time.Sleep(max(0, c.Timing().GatewayTimeout+time.Second-settled.Sub(stopped))) // the fault: paused past gateway_timeout
	paused.Signal(t, syscall.SIGCONT)
	continued := harness.Now()
	paused.WaitReady(t, wait)
	waitFlowing(t, c, group, 200)
	s := finish(t, c, prod, group)

	late := map[string]int{}
	for _, f := range s.Fetches {
		if f.Gateway == paused.ID && f.Start < stopped && f.End > continued {
			late[f.Outcome]++
			if f.OK() {
				t.Errorf("%s served %s@ep%d admitted at %s before the pause, answered at %s after it", paused.ID, f.Key, f.Epoch, f.Start, f.End)
			}
		}
	}
	t.Logf("handoff settled %v into the pause (gateway_timeout %v); fetches frozen across it answered %v",
		settled.Sub(stopped).Round(time.Millisecond), c.Timing().GatewayTimeout, late)
}
