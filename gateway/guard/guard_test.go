package guard_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/gateway/guard"
	"github.com/capgate/capgate/internal/coordinators"
	"github.com/capgate/capgate/ocap"
)

var t0 = time.Unix(1_900_000_000, 0)

// settings are the coordinator's, as every reset carries them.
var settings = &api.CoordinatorSettings{Issuer: "c", Audience: "a", LeewayMs: 1000, MaxLeaseMs: 60_000, GatewayTimeoutMs: 15_000, MaxClockSkewMs: 1000}

func capability(member string, partition int32, epoch uint64) *ocap.Claims {
	return &ocap.Claims{ID: fmt.Sprintf("jti-%s-%d-%d", member, partition, epoch), Subject: member, Group: "g", Topic: "t",
		Partition: &partition, Epoch: epoch, Ops: ocap.Ops(ocap.OpFetch), ExpiresAt: ocap.Seconds(t0.Add(time.Hour).Unix())}
}

// TestFollower: not ready until the first ack, in sync from the send time
// of the last good poll for Timeout, a delta below the ack asks for a
// snapshot, and the backoff doubles to its bound and resets on success.
func TestFollower(t *testing.T) {
	view := authz.NewView(authz.Config{})
	f := guard.NewFollower(guard.SyncConfig{Timeout: 10 * time.Second, BackoffMin: 50 * time.Millisecond, BackoffMax: time.Second}, view)
	if f.Refusal(t0) != api.CodeNotReady || f.After() != 0 {
		t.Fatalf("fresh follower: %q after %d", f.Refusal(t0), f.After())
	}
	if _, err := f.Apply(api.SyncResponse{Seq: 5, Reset: true}, t0); !errors.Is(err, guard.ErrNoSettings) {
		t.Fatalf("a reset without settings: %v", err)
	}
	if _, err := f.Apply(api.SyncResponse{Seq: 5, Reset: true, Settings: settings}, t0); err != nil {
		t.Fatal(err)
	}
	if f.Refusal(t0) != api.CodeNotReady {
		t.Fatal("ready before the answer was acknowledged")
	}
	if !f.Acked(t0, 5) || f.After() != 5 {
		t.Fatalf("first ack: after %d", f.After())
	}
	if code := f.Refusal(t0.Add(10 * time.Second)); code != "" {
		t.Fatalf("at sync_timeout after the send: %q, want in sync", code)
	}
	if code := f.Refusal(t0.Add(10*time.Second + 1)); code != api.CodeOutOfSync {
		t.Fatalf("past sync_timeout: %q, want out_of_sync", code)
	}
	if _, err := f.Apply(api.SyncResponse{Seq: 4}, t0); !errors.Is(err, guard.ErrSeqWentBack) || f.After() != 0 {
		t.Fatalf("delta below the ack: %v, after %d; want a snapshot asked for", err, f.After())
	}
	half := func(n int64) int64 { return n - 1 } // the top of the jitter range
	var waits []time.Duration
	for range 6 {
		waits = append(waits, f.Failed(half))
	}
	if fmt.Sprint(waits) != "[50ms 100ms 200ms 400ms 800ms 1s]" {
		t.Fatalf("backoff %v", waits)
	}
	f.Acked(t0, 6)
	if w := f.Failed(half); w != 50*time.Millisecond {
		t.Fatalf("backoff after a success %s, want reset to 50ms", w)
	}
}

// TestRegistryMatchesNaive: on random fetches and updates, Refused and
// Below pick exactly the fetches a naive scan picks, in admission order.
func TestRegistryMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		view := authz.NewView(authz.Config{})
		reg := guard.NewRegistry[int](guard.Bugs{})
		var all []*guard.Entry[int]
		for i := range rng.IntN(20) {
			c := capability(fmt.Sprint("m", rng.IntN(3)), int32(rng.IntN(4)), uint64(1+rng.IntN(4)))
			all = append(all, reg.Add(c, authz.Request{Topic: "t", Partition: c.PartitionNumber(), Op: ocap.OpFetch}, i))
		}
		for _, e := range all {
			if rng.IntN(4) == 0 {
				reg.Remove(e)
				e.Value = -1
			}
		}
		u := api.SyncResponse{Seq: 1, Reset: rng.IntN(5) == 0}
		for p := range 4 {
			if rng.IntN(2) == 0 {
				u.Fences = append(u.Fences, api.Fence{Group: "g", Topic: "t", Partition: int32(p), Epoch: uint64(1 + rng.IntN(5))})
			}
		}
		if rng.IntN(4) == 0 {
			u.RevokedMembers = []api.RevokedMember{{Group: "g", MemberID: "m0", Until: t0.Add(time.Hour).Unix()}}
		}
		ch, err := view.Apply(u, t0)
		if err != nil {
			t.Fatal(err)
		}
		raised := map[int32]bool{}
		for _, f := range ch.Raised {
			raised[f.Partition] = true
		}
		var want []int
		for _, e := range all {
			live := e.Value >= 0
			picked := ch.Reset || ch.Revoked || raised[e.Claims.PartitionNumber()]
			if live && picked && authz.Decide(e.Claims, e.Req, view, t0) != authz.Allow {
				want = append(want, e.Value)
			}
		}
		var got []int
		for _, e := range reg.Refused(ch, view, t0) {
			got = append(got, e.Value)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: Refused %v, want %v (changes %+v)", round, got, want, ch)
		}
		key := authz.FenceKey{Group: "g", Topic: "t", Partition: 1}
		want, got = nil, nil
		for _, e := range all {
			if e.Value >= 0 && e.Claims.PartitionNumber() == 1 && e.Claims.Epoch < 3 {
				want = append(want, e.Value)
			}
		}
		for _, e := range reg.Below(key, 3) {
			got = append(got, e.Value)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: Below %v, want %v", round, got, want)
		}
	}
}

// TestAckBeforeApplyIsABug: the planted bug acknowledges each answer one
// round before the view has it.
func TestAckBeforeApplyIsABug(t *testing.T) {
	view := authz.NewView(authz.Config{})
	f := guard.NewFollower(guard.SyncConfig{Timeout: time.Second, BackoffMin: time.Millisecond, BackoffMax: time.Second,
		Bugs: guard.Bugs{AckBeforeApply: true}}, view)
	f.Apply(api.SyncResponse{Seq: 1, Reset: true, Settings: settings}, t0)
	f.Acked(t0, 1)
	f.Apply(api.SyncResponse{Seq: 2, Fences: []api.Fence{{Group: "g", Topic: "t", Partition: 0, Epoch: 3}}}, t0)
	f.Acked(t0, 2)
	if f.After() != 2 || view.Fence("g", "t", 0) == 3 {
		t.Fatalf("after %d, fence %d: the bug should ack 2 without the fence", f.After(), view.Fence("g", "t", 0))
	}
}

// TestSettingsFit: the coordinator's settings are learned on a reset; a
// sync_timeout not below gateway_timeout − max_clock_skew keeps the
// gateway not ready although it synced, and a later reset that fits
// makes it ready.
func TestSettingsFit(t *testing.T) {
	f := guard.NewFollower(guard.SyncConfig{Timeout: 14 * time.Second, BackoffMin: time.Millisecond, BackoffMax: time.Second}, authz.NewView(authz.Config{}))
	f.Apply(api.SyncResponse{Seq: 1, Reset: true, Settings: settings}, t0) // 15s − 1s = 14s: not below
	f.Acked(t0, 1)
	if f.Refusal(t0) != api.CodeNotReady || f.Unfit() == nil {
		t.Fatalf("unfit settings: refusal %q, unfit %v", f.Refusal(t0), f.Unfit())
	}
	if s := f.Settings(); s == nil || s.Issuer != "c" || s.Leeway != time.Second || s.GatewayTimeout != 15*time.Second {
		t.Fatalf("learned %+v", s)
	}
	wider := *settings
	wider.GatewayTimeoutMs = 20_000
	f.Apply(api.SyncResponse{Seq: 2, Reset: true, Settings: &wider}, t0)
	f.Acked(t0, 2)
	if f.Refusal(t0) != "" || f.Unfit() != nil {
		t.Fatalf("fitting settings: refusal %q, unfit %v", f.Refusal(t0), f.Unfit())
	}
}

// TestMissedRoutes: a listed leader and the rest of a round are polled at
// once; a whole round of misses waits the jittered backoff, which doubles.
func TestMissedRoutes(t *testing.T) {
	f := guard.NewFollower(guard.SyncConfig{Timeout: 5 * time.Second, BackoffMin: 100 * time.Millisecond, BackoffMax: time.Second}, authz.NewView(authz.Config{}))
	list, err := coordinators.New([]string{"http://a", "http://b", "http://c"})
	if err != nil {
		t.Fatal(err)
	}
	top := func(n int64) int64 { return n - 1 }
	leader := "http://c"
	if next, wait := f.Missed(list, "http://a", &leader, top); next != "http://c" || wait != 0 {
		t.Fatalf("hint: next %s wait %s, want c at once", next, wait)
	}
	if next, wait := f.Missed(list, "http://c", nil, top); next != "http://a" || wait != 0 {
		t.Fatalf("c failed: next %s wait %s, want a at once", next, wait)
	}
	if next, wait := f.Missed(list, "http://a", nil, top); next != "http://b" || wait != 100*time.Millisecond {
		t.Fatalf("a round missed: next %s wait %s, want b after 100ms", next, wait)
	}
	for range 2 {
		f.Missed(list, list.Current(), nil, top)
	}
	if _, wait := f.Missed(list, list.Current(), nil, top); wait != 200*time.Millisecond {
		t.Fatalf("second round: wait %s, want 200ms", wait)
	}
}

// TestRegistryKeysStayBounded: a key's list outlives its last fetch (one
// fetch at a time costs one map lookup), but the empty lists are swept:
// fetches one at a time over 20,000 partitions leave at most 1,024 keys,
// and 1,500 fetches in flight over as many keys keep theirs through the
// sweeps, each still found (Below, Entries) and removed once.
func TestRegistryKeysStayBounded(t *testing.T) {
	reg := guard.NewRegistry[int](guard.Bugs{})
	req := func(c *ocap.Claims) authz.Request {
		return authz.Request{Topic: "t", Partition: c.PartitionNumber(), Op: ocap.OpFetch}
	}
	for p := range 20_000 {
		c := capability("m", int32(p), 1)
		reg.Remove(reg.Add(c, req(c), p))
		if reg.Keys() > 1024 {
			t.Fatalf("after %d fetches one at a time: %d keys kept", p+1, reg.Keys())
		}
	}
	var live []*guard.Entry[int]
	for p := range 1500 {
		c := capability("m", int32(100_000+p), 1)
		live = append(live, reg.Add(c, req(c), p))
	}
	for p := range 20_000 {
		c := capability("m", int32(200_000+p), 1)
		reg.Remove(reg.Add(c, req(c), -1))
	}
	if n := reg.Keys(); n > 2*1500+2 {
		t.Fatalf("%d keys kept with 1,500 fetches in flight", n)
	}
	if n := len(reg.Entries()); n != 1500 || reg.Len() != 1500 {
		t.Fatalf("%d entries (Len %d) in flight, want 1,500", n, reg.Len())
	}
	for i, e := range live {
		below := reg.Below(authz.FenceKey{Group: "g", Topic: "t", Partition: int32(100_000 + i)}, 2)
		if len(below) != 1 || below[0] != e {
			t.Fatalf("fetch %d: Below finds %d", i, len(below))
		}
		reg.Remove(e)
		reg.Remove(e) // a second time: nothing
	}
	if reg.Len() != 0 || len(reg.Entries()) != 0 {
		t.Fatalf("Len %d after every fetch finished", reg.Len())
	}
}
