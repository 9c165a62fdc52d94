package faults

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/e2e/harness"
)

// TestConsumerKill9: a consumer process is killed with SIGKILL mid-stream.
// Its partitions move to the survivors only after its session timeout
// (it never released them), the survivors start at its last committed
// offsets, nothing is lost, and the only duplicates are records it was
// handed after its last commit (all checked by the harness's checkers).
func TestConsumerKill9(t *testing.T) {
	needSignals(t)
	t.Parallel()
	const group = "kill9"
	c := harness.Start(t, harness.Options{Groups: []string{group}, Binaries: binaries})
	prod := c.StartProducer(t, produceEvery)
	var members []*harness.ConsumerProcess
	for _, name := range []string{"a", "b", "c"} {
		members = append(members, c.StartConsumerProcess(t, harness.MemberOptions{Name: name, Group: group}))
	}
	own := waitSettled(t, c, group, 3)
	waitFlowing(t, c, group, 200)

	victim := members[0]
	lost := own[victim.MemberID()]
	victim.Kill()
	killed := harness.Now()
	after := waitSettled(t, c, group, 2)
	for _, p := range lost {
		if owner := ownerOf(after, p); owner == victim.MemberID() || owner == "" {
			t.Errorf("partition %d still owned by %q after the kill", p, owner)
		}
	}
	waitFlowing(t, c, group, 200)
	s := finish(t, c, prod, group)

	var regrant []time.Duration
	for _, g := range s.Grants {
		if g.At > killed && !g.Renewal && slices.Contains(lost, g.Key.Partition) {
			regrant = append(regrant, g.At.Sub(killed).Round(time.Millisecond))
		}
	}
	if len(regrant) < len(lost) {
		t.Errorf("victim's partitions %v: only %d re-grants after the kill", lost, len(regrant))
	}
	t.Logf("victim %s owned %v; re-granted %v after the kill (session timeout %v)", victim.MemberID(), lost, regrant, c.Timing().SessionTimeout)
}

func ownerOf(own map[string][]int32, p int32) string {
	for m, ps := range own {
		if slices.Contains(ps, p) {
			return m
		}
	}
	return ""
}

// TestConsumerPausedBeyondSession: a consumer process is stopped with
// SIGSTOP for longer than its session timeout, then continued. Meanwhile
// its partitions move to the other member. Once it runs again, every fetch
// and commit it makes with its old capabilities is refused with 409 (the
// test also replays its old capability and member token itself, so the
// refusal is checked whatever the SDK does first), it rejoins, and the
// checkers hold: the zombie never read a partition while another member
// did.
func TestConsumerPausedBeyondSession(t *testing.T) {
	needSignals(t)
	t.Parallel()
	const group = "pause"
	// Capabilities outlive the pause and the settling (renewed at half
	// their lease, so at least 15s left): the replayed ones are refused for
	// their fence (409), not for their age (401).
	timing := harness.DefaultTiming()
	timing.CapabilityLease = 30 * time.Second
	c := harness.Start(t, harness.Options{Groups: []string{group}, Binaries: binaries, Timing: timing})
	prod := c.StartProducer(t, produceEvery)
	zombie := c.StartConsumerProcess(t, harness.MemberOptions{Name: "zombie", Group: group, PrintSecrets: true})
	other := c.StartConsumerProcess(t, harness.MemberOptions{Name: "other", Group: group})
	waitSettled(t, c, group, 2)
	waitFlowing(t, c, group, 200)

	oldMember := zombie.MemberID()
	secrets := lastSecrets(zombie.Lines(), oldMember)
	zombie.Pause(t)
	paused := time.Now()
	own := waitSettled(t, c, group, 1)
	if len(own[other.MemberID()]) != int(c.Partitions()) {
		t.Fatalf("while paused: ownership %v, want every partition with %s", own, other.MemberID())
	}
	time.Sleep(max(0, 3*time.Second-time.Since(paused))) // the fault: paused 3s, twice the session timeout
	// Taken before SIGCONT: a stopped process sends nothing, and what the
	// zombie sends the instant it runs again must count as after the
	// resume (taken after, it raced those requests and could miss them all).
	resumed := harness.Now()
	zombie.Resume(t)

	replayZombie(t, c, group, secrets)
	waitSettled(t, c, group, 2)
	harness.Eventually(t, wait, "zombie rejoined", func() (bool, string) {
		id := zombie.MemberID()
		return id != oldMember, "still " + id
	})
	waitFlowing(t, c, group, 200)
	s := finish(t, c, prod, group)
	checkZombieRefused(t, s, oldMember, resumed)
}

// zombieSecrets are a member's last capabilities and member token.
type zombieSecrets struct {
	member       string
	memberToken  string
	capabilities map[int32]string
}

func lastSecrets(lines []harness.Line, member string) zombieSecrets {
	z := zombieSecrets{member: member, capabilities: map[int32]string{}}
	for _, l := range lines {
		switch {
		case l.Kind == harness.LineJoined && l.Member == member:
			z.memberToken = l.Token
		case (l.Kind == harness.LineGrant || l.Kind == harness.LineRenew) && l.Member == member && l.Capability != "":
			z.capabilities[l.Partition] = l.Capability
		}
	}
	return z
}

// replayZombie sends the zombie's own old requests: a fetch with each old
// capability through every gateway (409 capability_revoked), and a commit
// with its member token and capability (409).
func replayZombie(t *testing.T, c *harness.Cluster, group string, z zombieSecrets) {
	t.Helper()
	if z.memberToken == "" || len(z.capabilities) == 0 {
		t.Fatalf("no secrets printed for %s", z.member)
	}
	for p, capability := range z.capabilities {
		for _, gw := range c.GatewayURLs() {
			status, contentType, body := rawFetch(t, c, gw, capability, p, 0)
			if code := errorCode(t, contentType, body); status != http.StatusConflict || code != api.CodeCapabilityRevoked {
				t.Errorf("zombie fetch of partition %d at %s: %d %s, want 409 capability_revoked", p, gw, status, code)
			}
		}
		req := api.CommitRequest{Offsets: []api.CommitOffset{{Topic: c.Topic(), Partition: p, Offset: 0, Capability: capability}}}
		status, body := postJSON(t, c, c.Coordinator.URL+"/v1/groups/"+group+"/commit", z.memberToken, req)
		if status != http.StatusConflict {
			t.Errorf("zombie commit of partition %d: %d %s, want 409", p, status, body)
		}
	}
}

// checkZombieRefused: after the resume the zombie spoke under its old
// membership — it must, to learn that it lost it: a heartbeat, a fetch or
// a commit — and none of those requests succeeded.
func checkZombieRefused(t *testing.T, s harness.Snapshot, member string, resumed harness.Time) {
	t.Helper()
	codes := map[string]int{}
	refuse := func(kind, what string, status int, code string, sent harness.Time) {
		codes[fmt.Sprintf("%s %d %s", kind, status, code)]++
		if status/100 == 2 {
			t.Errorf("zombie %s %s sent %s after the resume, under its old membership, answered %d", kind, what, sent, status)
		}
	}
	for _, f := range s.ClientFetches {
		if f.Member == member && f.Sent >= resumed && f.Status != 0 {
			refuse("fetch", f.Key.String(), f.Status, f.Code, f.Sent)
		}
	}
	for _, cm := range s.Commits {
		if cm.Member == member && cm.Sent >= resumed && cm.Status != 0 {
			refuse("commit", cm.Key.String(), cm.Status, cm.Code, cm.Sent)
		}
	}
	for _, call := range s.Calls {
		if call.Member == member && call.Sent >= resumed && call.Op != "join" && call.Status != 0 {
			refuse(call.Op, "", call.Status, call.Code, call.Sent)
		}
	}
	if len(codes) == 0 {
		t.Errorf("the zombie sent nothing answered under its old membership %s after the resume: nothing was checked", member)
	}
	t.Logf("zombie's own requests after the resume under its old membership: %v", codes)
}
