package group_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

// PaceNews picks earliest deadline first: a grant, then a renewal whose
// holder holds nothing known (HeldUntil zero: after a takeover), then
// the renewal whose capability ends soonest; ties by partition. Revokes
// always go; both halves come back in partition order.
func TestPaceNewsEarliestDeadlineFirst(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	g := func(p int32, held time.Time) group.Grant {
		return group.Grant{Group: "g", Holder: "m", Topic: "t", Partition: p, Epoch: 1, ExpiresAt: at(60), HeldUntil: held}
	}
	n := group.News{Ref: 7, Group: "g", MemberID: "m",
		Revoke: []api.PartitionRef{{Topic: "t", Partition: 9, Epoch: 3}},
		Grants: []group.Grant{g(5, time.Time{})},
		Renew:  []group.Grant{g(0, at(30)), g(1, at(10)), g(2, time.Time{}), g(3, at(20)), g(4, time.Time{})},
	}
	parts := func(gs []group.Grant) []int32 {
		var out []int32
		for _, x := range gs {
			out = append(out, x.Partition)
		}
		return out
	}
	for _, tc := range []struct {
		k                                   int
		nowGrants, nowRenew, laterG, laterR []int32
	}{
		{0, nil, nil, []int32{5}, []int32{0, 1, 2, 3, 4}},
		{1, []int32{5}, nil, nil, []int32{0, 1, 2, 3, 4}},
		{2, []int32{5}, []int32{2}, nil, []int32{0, 1, 3, 4}},
		{3, []int32{5}, []int32{2, 4}, nil, []int32{0, 1, 3}},
		{4, []int32{5}, []int32{1, 2, 4}, nil, []int32{0, 3}},
		{5, []int32{5}, []int32{1, 2, 3, 4}, nil, []int32{0}},
		{6, []int32{5}, []int32{0, 1, 2, 3, 4}, nil, nil},
		{9, []int32{5}, []int32{0, 1, 2, 3, 4}, nil, nil},
	} {
		now, later := group.PaceNews(n, tc.k)
		got := fmt.Sprint(parts(now.Grants), parts(now.Renew), parts(later.Grants), parts(later.Renew))
		want := fmt.Sprint(tc.nowGrants, tc.nowRenew, tc.laterG, tc.laterR)
		if got != want {
			t.Errorf("k=%d: now grants, now renewals, later grants, later renewals = %s, want %s", tc.k, got, want)
		}
		if now.Ref != 7 || now.MemberID != "m" || len(now.Revoke) != 1 || later.Ref != 0 || len(later.Revoke) != 0 || later.MemberID != "m" {
			t.Errorf("k=%d: now %+v later %+v: the revoke and the answer's ref go now, the rest names the member", tc.k, now, later)
		}
	}
}

// A member owns six partitions, but its tenant's rate pays for one
// capability every two seconds — fewer than six capabilities renewed
// at half an 8 s lease need (a deficit). Its join's answer paid for two;
// the other four went back (RedeliverNews), as paceMints does. The
// shell's pacing is played around the real machine: each heartbeat's
// news split by PaceNews, the rest redelivered. Every partition gets a
// capability within the first six after the join's, and then in turn,
// the one whose capability ends first — never more than twelve
// capabilities apart. The naive split (partition
// order, renewals first: the shell before) is played too, and must
// starve a partition: it proves the check can fail.
func TestPacedMintsServeEveryPartitionInTurn(t *testing.T) {
	partitionOrder := func(n group.News, k int) (now, later group.News) {
		now = group.News{Ref: n.Ref, Group: n.Group, MemberID: n.MemberID, Revoke: n.Revoke}
		later = group.News{Group: n.Group, MemberID: n.MemberID}
		k = min(k, len(n.Renew)+len(n.Grants))
		r := min(k, len(n.Renew))
		now.Renew, later.Renew = n.Renew[:r], n.Renew[r:]
		now.Grants, later.Grants = n.Grants[:k-r], n.Grants[k-r:]
		return now, later
	}
	for _, tc := range []struct {
		name   string
		pace   func(group.News, int) (group.News, group.News)
		starve bool
	}{{"earliest deadline first", group.PaceNews, false}, {"partition order", partitionOrder, true}} {
		t.Run(tc.name, func(t *testing.T) {
			handed := playPacedMember(t, tc.pace)
			gap, worst := 0, int32(-1)
			last := map[int32]int{}
			for i, p := range handed {
				if j, ok := last[p]; ok && i-j > gap {
					gap, worst = i-j, p
				}
				last[p] = i
			}
			for p := range int32(6) {
				if _, ok := last[p]; !ok {
					gap, worst = len(handed), p
				} else if d := len(handed) - last[p]; d > gap {
					gap, worst = d, p
				}
			}
			firstSix := slices.Clone(handed[:min(6, len(handed))])
			slices.Sort(firstSix)
			firstSix = slices.Compact(firstSix)
			starved := gap > 2*6 || len(firstSix) < 6
			t.Logf("capabilities in order %v", handed)
			if starved != tc.starve {
				t.Fatalf("capabilities in order %v: partition %d waited %d capabilities, the first six covered %v (starved %v, want %v)",
					handed, worst, gap, firstSix, starved, tc.starve)
			}
		})
	}
}

// playPacedMember plays TestPacedMintsServeEveryPartitionInTurn's member
// for 60 s with pace as the shell's split and returns the partitions of
// the capabilities it was handed after its join, in order.
func playPacedMember(t *testing.T, pace func(group.News, int) (group.News, group.News)) []int32 {
	w := newWorld(t, func(c *group.Config) { c.CapabilityLease = 8 * time.Second })
	w.topics(map[string]int32{"t": 6})
	w.pollUntilParked("gw")
	var answers []group.News
	w.drop = func(msg group.Message) bool {
		n, ok := msg.(group.News)
		if ok {
			answers = append(answers, n)
		}
		return ok
	}
	a := w.join("g", "a", "t")
	w.settle("g")
	joined := w.clients[a].grants
	if len(joined) != 6 {
		t.Fatalf("join granted %d, want 6", len(joined))
	}
	_, later := pace(group.News{Group: "g", MemberID: a, Grants: joined}, 2)
	w.step(group.RedeliverNews{Ref: w.nextRef(), News: later})
	var handed []int32
	tokens := 0.0
	for range 60 {
		tokens = min(tokens+0.5, 1) // a capability every two seconds, burst 1
		w.heartbeat(a)
		for len(answers) > 0 {
			n := answers[0]
			answers = answers[1:]
			k := min(int(tokens), len(n.Grants)+len(n.Renew))
			tokens -= float64(k)
			now, later := pace(n, k)
			w.receive(w.clients[a], slices.Concat(now.Grants, now.Renew))
			for _, g := range slices.Concat(now.Grants, now.Renew) {
				handed = append(handed, g.Partition)
			}
			w.step(group.RedeliverNews{Ref: w.nextRef(), News: later})
		}
		w.advance(time.Second)
	}
	return handed
}

// Unreadable counts what a held heartbeat waits for more tokens for:
// every grant, a renewal of no capability known or of one that ends by
// the end of the hold — not a renewal of a capability still good after
// it (holding a moved partition's paid grant for those would only delay
// the grant).
func TestUnreadable(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	g := func(p int32, held time.Time) group.Grant {
		return group.Grant{Group: "g", Holder: "m", Topic: "t", Partition: p, Epoch: 1, ExpiresAt: at(60), HeldUntil: held}
	}
	for _, c := range []struct {
		n    group.News
		want int
	}{
		{group.News{}, 0},
		{group.News{Grants: []group.Grant{g(0, time.Time{}), g(1, at(30))}}, 2},
		{group.News{Renew: []group.Grant{g(0, time.Time{}), g(1, at(3)), g(2, at(4)), g(3, at(30))}}, 2},
		{group.News{Grants: []group.Grant{g(0, time.Time{})}, Renew: []group.Grant{g(1, at(30)), g(2, at(30))}}, 1},
	} {
		if got := group.Unreadable(c.n, at(3)); got != c.want {
			t.Errorf("Unreadable(%d grants, renewals held until %v, at 3s) = %d, want %d", len(c.n.Grants), heldUntil(c.n.Renew), got, c.want)
		}
	}
}

func heldUntil(gs []group.Grant) []time.Time {
	var out []time.Time
	for _, g := range gs {
		out = append(out, g.HeldUntil)
	}
	return out
}
