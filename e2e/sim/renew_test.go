package sim

import (
	"testing"
	"time"
)

// TestRenewalsMoveNothing: a member renewing its member token (the SDK's
// carry-over, join with renew_token) is renewed in place — no fence, no
// regrant, its partitions never pause and nothing is read twice. In a
// calm world (no faults, no churn: nothing else fences a member) with
// 10 s member tokens, every seed renews its members dozens of times, no
// partition is fenced and granted back to its own holder and no record
// is delivered twice; with the shell taking a renewal for a plain rejoin
// (bugs.renewFences) the same seeds fence and regrant at every renewal —
// and the grant safety checker sees the member granted a new epoch while
// it still reads the old one — so the check can fail.
func TestRenewalsMoveNothing(t *testing.T) {
	t.Parallel()
	calm := func(p *profile) {
		p.net = netFaults{latencyMax: p.net.latencyMax}
		p.churnEvery = 24 * time.Hour // no membership change within the run
		p.coordCrash, p.readyCrash, p.gatewayCrash, p.cutEvery = 0, 0, 0, 0
		p.adminEvery, p.stuckEvery, p.rogueEvery, p.growAt = 0, 0, 0, 0
		p.memberTTL, p.memberRenew = 10*time.Second, 3*time.Second
	}
	const seeds = 6
	opts := Options{tune: calm, Duration: 2 * time.Minute}
	var renewals, caught int
	var first error // the planted bug's first failure
	for seed := uint64(1); seed <= seeds; seed++ {
		r := Run(seed, opts)
		if r.Err != nil {
			t.Fatalf("seed %d: %v", seed, r.Err)
		}
		if r.Stats.Refences != 0 || r.Stats.Duplicates != 0 || r.Stats.ExpiredMemberTokens != 0 {
			t.Errorf("seed %d: %d partitions fenced and granted back to their holder, %d records delivered twice, %d requests on an expired member token in a calm world with %d renewals in place",
				seed, r.Stats.Refences, r.Stats.Duplicates, r.Stats.ExpiredMemberTokens, r.Stats.Renewals)
		}
		// Each consumer renews every 7 s of its 10 s tokens (3 s margin).
		if min := r.Stats.Simulated / (10 * time.Second); r.Stats.Renewals < int(min) {
			t.Errorf("seed %d: %d renewals in %s", seed, r.Stats.Renewals, r.Stats.Simulated)
		}
		renewals += r.Stats.Renewals

		bad := opts
		bad.bugs.renewFences = true
		if b := Run(seed, bad); b.Err != nil || b.Stats.Refences > 0 {
			caught++
			if first == nil {
				first = b.Err
			}
		}
	}
	if caught != seeds {
		t.Errorf("with renewals fencing (bugs.renewFences) %d of %d seeds failed a checker or fenced a partition back to its holder: the check cannot fail", caught, seeds)
	}
	t.Logf("%d seeds: %d renewals in place, nothing fenced, nothing read twice; fencing at each renewal instead caught in %d: %v", seeds, renewals, caught, first)
}

// TestRenewalsInGraceKeepTheirMembers runs groups.renew_token_grace
// (listener12) in the simulation: member tokens of 10 s renewed 1 s
// before their expiry, and the coordinator crashing every 15–25 s for up
// to 6 s (a restart: the state reloaded, as a takeover reads the log),
// so renewals meet a coordinator that is down and land after the token
// expired. Within the grace (5 s, the default) the member is renewed in
// place, the revocations checked as at the grace's start — and every
// checker holds. With the grace off the same seeds renew none in grace:
// those members are refused token_expired and rejoin as new members, so
// the grace is what the run exercised.
func TestRenewalsInGraceKeepTheirMembers(t *testing.T) {
	t.Parallel()
	tune := func(grace time.Duration) func(*profile) {
		return func(p *profile) {
			p.memberTTL, p.memberRenew = 10*time.Second, time.Second
			p.coordCrash, p.coordDownMax, p.readyCrash = 20*time.Second, 6*time.Second, 0
			p.machine.RenewTokenGrace = grace
		}
	}
	const seeds = 6
	var inGrace, renewals, without, refused int
	for seed := uint64(1); seed <= seeds; seed++ {
		r := Run(seed, Options{tune: tune(5 * time.Second), Duration: 2 * time.Minute})
		if r.Err != nil {
			t.Fatalf("seed %d: %v", seed, r.Err)
		}
		inGrace, renewals = inGrace+r.Stats.RenewalsInGrace, renewals+r.Stats.Renewals
		off := Run(seed, Options{tune: tune(0), Duration: 2 * time.Minute})
		if off.Err != nil {
			t.Fatalf("seed %d, grace off: %v", seed, off.Err)
		}
		without += off.Stats.RenewalsInGrace
		refused += off.Stats.RenewalsExpired
	}
	if inGrace == 0 {
		t.Fatalf("%d seeds: %d renewals, none in grace: the run never exercised it", seeds, renewals)
	}
	if without != 0 || refused == 0 {
		t.Errorf("grace off: %d renewals taken in grace and %d refused token_expired, want none and some", without, refused)
	}
	t.Logf("%d seeds: %d renewals, %d of them within the grace, every checker held; grace off: %d refused token_expired", seeds, renewals, inGrace, refused)
}
