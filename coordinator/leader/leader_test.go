package leader

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func cfg(id string) Config {
	return Config{ID: id, BeatInterval: 200 * time.Millisecond, LeaseTimeout: time.Second, Stagger: 100 * time.Millisecond}
}

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func expect(t *testing.T, d Decision, role Role, do Action) {
	t.Helper()
	if d.Role != role || d.Do != do {
		t.Fatalf("decision %s/%s (reason %q), want %s/%s", d.Role, d.Do, d.Reason, role, do)
	}
}

func TestFollowerStandsAfterSilenceAndLeads(t *testing.T) {
	e := New(cfg("b"), at(0))
	expect(t, e.Decide(at(0)), Follower, None)
	e.Step(at(500), Observed{Writer: "a", Leader: Hint{ID: "a", URL: "http://a"}})
	d := e.Decide(at(900))
	expect(t, d, Follower, None)
	if d.Leader.URL != "http://a" || !d.At.Equal(at(1000)) {
		t.Fatalf("hint %+v until %s, want http://a until +1000ms", d.Leader, d.At.Sub(t0))
	}
	d = e.Decide(at(1000)) // half a lease of silence: the leader is likely gone
	expect(t, d, Follower, None)
	if d.Leader != (Hint{}) || !d.At.Equal(at(1600)) {
		t.Fatalf("hint %+v, stand at %s; want none, +1600ms", d.Leader, d.At.Sub(t0))
	}
	d = e.Decide(at(1600))
	expect(t, d, Candidate, Promote)
	if d.Leader != (Hint{}) {
		t.Fatalf("a candidate names the silent leader %+v", d.Leader)
	}
	expect(t, e.Decide(at(1700)), Candidate, None) // not asked twice
	e.Step(at(1800), PromoteDone{})
	d = e.Decide(at(1800))
	expect(t, d, Leader, Beat)
	if d.Leader.ID != "b" {
		t.Fatalf("leader names %+v, want itself", d.Leader)
	}
	expect(t, e.Decide(at(1850)), Leader, None) // beat in flight
	e.Step(at(1850), WriteDone{Beat: true})
	d = e.Decide(at(1900))
	expect(t, d, Leader, None)
	if !d.At.Equal(at(2050)) {
		t.Fatalf("next beat at %s, want +2050ms", d.At.Sub(t0))
	}
	expect(t, e.Decide(at(2050)), Leader, Beat)
}

func TestHintWaitsForTheNewWritersBeat(t *testing.T) {
	e := New(cfg("c"), at(0))
	e.Step(at(10), Observed{Writer: "a", Leader: Hint{ID: "a", URL: "http://a"}})
	// b's barrier: the last beat is still a's.
	e.Step(at(20), Observed{Writer: "b", Leader: Hint{ID: "a", URL: "http://a"}})
	if d := e.Decide(at(30)); d.Leader != (Hint{}) {
		t.Fatalf("hint %+v after another writer's barrier, want unknown", d.Leader)
	}
	e.Step(at(40), Observed{Writer: "b", Leader: Hint{ID: "b", URL: "http://b"}})
	if d := e.Decide(at(50)); d.Leader.URL != "http://b" {
		t.Fatalf("hint %+v, want http://b", d.Leader)
	}
}

func leading(t *testing.T) *Elector {
	t.Helper()
	e := New(cfg("a"), at(0))
	expect(t, e.Decide(at(1100)), Candidate, Promote)
	e.Step(at(1100), PromoteDone{})
	expect(t, e.Decide(at(1100)), Leader, Beat)
	e.Step(at(1110), WriteDone{Beat: true})
	return e
}

func TestFencedWriteStepsDownAtOnce(t *testing.T) {
	for _, beat := range []bool{true, false} {
		t.Run(fmt.Sprint("beat=", beat), func(t *testing.T) {
			e := leading(t)
			if beat {
				expect(t, e.Decide(at(1310)), Leader, Beat)
			}
			e.Step(at(1320), WriteDone{Beat: beat, Err: errors.New("fenced"), Fenced: true})
			d := e.Decide(at(1320))
			expect(t, d, SteppingDown, StepDown)
			if d.Leader != (Hint{}) {
				t.Fatalf("a deposed leader names %+v", d.Leader)
			}
			expect(t, e.Decide(at(1330)), SteppingDown, None)
			e.Step(at(1400), Stopped{})
			expect(t, e.Decide(at(1400)), Follower, None)
			// Stands again only a whole lease + stagger later.
			expect(t, e.Decide(at(2499)), Follower, None)
			expect(t, e.Decide(at(2500)), Candidate, Promote)
		})
	}
}

func TestBrokenWriteStepsDown(t *testing.T) {
	e := leading(t)
	e.Step(at(1200), WriteDone{Err: errors.New("timeout")})
	expect(t, e.Decide(at(1200)), SteppingDown, StepDown)
}

func TestLeaderWithoutWritesStepsDownAfterItsLease(t *testing.T) {
	e := leading(t)
	expect(t, e.Decide(at(1310)), Leader, Beat)
	// The beat hangs (cut off from Kafka): no write for a lease.
	d := e.Decide(at(2000))
	expect(t, d, Leader, None)
	if !d.At.Equal(at(2110)) {
		t.Fatalf("lease ends at %s, want +2110ms", d.At.Sub(t0))
	}
	// The lease lapsed with a write in flight: its outcome is the
	// renewal; it gets one more lease.
	d = e.Decide(at(2110))
	expect(t, d, Leader, None)
	if !d.At.Equal(at(3110)) {
		t.Fatalf("renewal ends at %s, want +3110ms", d.At.Sub(t0))
	}
	expect(t, e.Decide(at(3110)), SteppingDown, StepDown)
	e.Step(at(3200), WriteDone{Beat: true, Err: errors.New("closed")}) // the hung beat returns
	expect(t, e.Decide(at(3200)), SteppingDown, None)
	e.Step(at(3200), Stopped{})
	expect(t, e.Decide(at(3200)), Follower, None)
}

// A leader paused past its lease (its timer fires late) does not step
// down on its own clock: it renews with a beat at once. Committed:
// nobody took over, it keeps leading and beats on as usual.
func TestPausedLeaderRenewsAndKeepsLeading(t *testing.T) {
	e := leading(t)
	d := e.Decide(at(9000)) // resumed long after the lease lapsed
	expect(t, d, Leader, Beat)
	if !d.At.Equal(at(10000)) || d.Leader.ID != "a" {
		t.Fatalf("renewing: %+v, want it to name itself until +10000ms", d)
	}
	expect(t, e.Decide(at(9001)), Leader, None) // one renewal at a time
	e.Step(at(9020), WriteDone{Beat: true})
	d = e.Decide(at(9020))
	expect(t, d, Leader, None)
	if !d.At.Equal(at(9220)) {
		t.Fatalf("next beat at %s, want +9220ms", d.At.Sub(t0))
	}
	expect(t, e.Decide(at(9220)), Leader, Beat)
}

// A paused leader deposed meanwhile: its renewal — or the write that was
// in flight when it stopped — fails fenced, and that, not its clock,
// steps it down.
func TestPausedLeaderStepsDownOnItsFencedRenewal(t *testing.T) {
	for _, inFlight := range []bool{false, true} {
		t.Run(fmt.Sprint("in flight=", inFlight), func(t *testing.T) {
			e := leading(t)
			if inFlight {
				expect(t, e.Decide(at(1310)), Leader, Beat) // then SIGSTOP
				expect(t, e.Decide(at(9000)), Leader, None)
			} else {
				expect(t, e.Decide(at(9000)), Leader, Beat)
			}
			e.Step(at(9010), WriteDone{Beat: true, Err: errors.New("fenced"), Fenced: true})
			d := e.Decide(at(9010))
			expect(t, d, SteppingDown, StepDown)
			if !strings.HasPrefix(d.Reason, "fenced") {
				t.Fatalf("reason %q, want the fenced write", d.Reason)
			}
		})
	}
}

func TestLostRaceFollowsAgain(t *testing.T) {
	e := New(cfg("b"), at(0))
	expect(t, e.Decide(at(1100)), Candidate, Promote)
	e.Step(at(1200), PromoteDone{Err: errors.New("fenced"), Fenced: true})
	expect(t, e.Decide(at(1200)), Follower, None)
	expect(t, e.Decide(at(2299)), Follower, None)
	expect(t, e.Decide(at(2300)), Candidate, Promote)
}

func TestLeaderSeeingAnotherWriterStepsDown(t *testing.T) {
	e := leading(t)
	e.Step(at(1200), Observed{Writer: "a"})
	expect(t, e.Decide(at(1200)), Leader, None)
	e.Step(at(1250), Observed{Writer: "b"})
	expect(t, e.Decide(at(1250)), SteppingDown, StepDown)
}

func TestOwnOldCommitsAreNotLiveness(t *testing.T) {
	e := New(cfg("a"), at(0))
	e.Step(at(900), Observed{Writer: "a", Leader: Hint{ID: "a", URL: "http://a"}})
	expect(t, e.Decide(at(1100)), Candidate, Promote)
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{BeatInterval: time.Second, LeaseTimeout: 3 * time.Second},
		{ID: "a", LeaseTimeout: time.Second},
		{ID: "a", BeatInterval: time.Second, LeaseTimeout: time.Second},
		{ID: "a", BeatInterval: time.Second, LeaseTimeout: 3 * time.Second, Stagger: 3 * time.Second},
	} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := cfg("a").Validate(); err != nil {
		t.Fatal(err)
	}
}

// replica is a tiny in-test world for TestRandomRunsStepDownWhenFenced:
// a shared producer epoch stands for the log's fencing.
type replica struct {
	e        *Elector
	epoch    int // the epoch this replica's writer holds; 0 none
	promote  bool
	beat     bool
	stopping bool
}

// Random schedules of three replicas (pauses, lost races, slow outcomes):
// a replica whose write meets a newer epoch is never Leader afterwards,
// every action comes in the role it belongs to, and someone leads.
func TestRandomRunsStepDownWhenFenced(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		epoch := 0
		var rs []*replica
		for i := range 3 {
			c := cfg(fmt.Sprint("r", i))
			c.Stagger = time.Duration(i) * 50 * time.Millisecond
			rs = append(rs, &replica{e: New(c, t0)})
		}
		now := t0
		led := false
		for range 400 {
			now = now.Add(time.Duration(rng.IntN(150)) * time.Millisecond)
			r := rs[rng.IntN(len(rs))]
			if rng.IntN(10) == 0 {
				continue // paused
			}
			switch {
			case r.promote && rng.IntN(2) == 0:
				epoch++
				r.epoch, r.promote = epoch, false
				r.e.Step(now, PromoteDone{})
			case r.beat && rng.IntN(2) == 0:
				r.beat = false
				if r.epoch != epoch {
					r.e.Step(now, WriteDone{Beat: true, Err: errors.New("fenced"), Fenced: true})
					if r.e.Role() == Leader {
						t.Fatalf("seed %d: fenced replica still leads", seed)
					}
				} else {
					r.e.Step(now, WriteDone{Beat: true})
					for _, o := range rs {
						if o != r {
							o.e.Step(now, Observed{Writer: r.e.cfg.ID, Leader: Hint{ID: r.e.cfg.ID}})
						}
					}
				}
			case r.stopping && !r.beat:
				r.stopping, r.epoch = false, 0
				r.e.Step(now, Stopped{})
			}
			d := r.e.Decide(now)
			want := map[Action]Role{Promote: Candidate, Beat: Leader, StepDown: SteppingDown}
			if role, ok := want[d.Do]; ok && d.Role != role {
				t.Fatalf("seed %d: %s asked of a %s", seed, d.Do, d.Role)
			}
			switch d.Do {
			case Promote:
				r.promote = true
			case Beat:
				r.beat = true
			case StepDown:
				r.stopping = true
			}
			led = led || r.e.Role() == Leader
		}
		if !led {
			t.Fatalf("seed %d: nobody ever led", seed)
		}
	}
}

// A leader's resignation (a clean shutdown's last commit) ends its lease
// at once: a follower stands after its Stagger alone, saying why. A
// commit after the resignation is a live writer again.
func TestFollowerStandsAtOnceOnAResignation(t *testing.T) {
	e := New(cfg("b"), at(0))
	e.Step(at(100), Observed{Writer: "a", Leader: Hint{ID: "a", URL: "http://a"}})
	e.Step(at(300), Observed{Writer: "a", Leader: Hint{ID: "a"}, Resigned: true})
	d := e.Decide(at(300))
	expect(t, d, Follower, None)
	if d.Leader != (Hint{}) || !d.At.Equal(at(400)) {
		t.Fatalf("after a resignation: hint %+v, stand at %s; want none, +400ms (the stagger)", d.Leader, d.At.Sub(t0))
	}
	d = e.Decide(at(400))
	expect(t, d, Candidate, Promote)
	if !strings.Contains(d.Reason, "the leader (a) resigned") {
		t.Fatalf("reason %q", d.Reason)
	}

	e = New(cfg("b"), at(0))
	e.Step(at(300), Observed{Writer: "a", Leader: Hint{ID: "a"}, Resigned: true})
	e.Step(at(350), Observed{Writer: "a", Leader: Hint{ID: "a"}}) // it wrote again
	expect(t, e.Decide(at(400)), Follower, None)
	if d := e.Decide(at(1449)); d.Do != None {
		t.Fatalf("stands %s after a live commit: %s", at(1449).Sub(at(350)), d.Do)
	}

	// Its own resignation, read back after a restart, is no sign of life
	// nor a hand-over to itself.
	e = New(cfg("a"), at(0))
	e.Step(at(300), Observed{Writer: "a", Leader: Hint{ID: "a"}, Resigned: true})
	if d := e.Decide(at(400)); d.Do != None {
		t.Fatalf("stands at once on its own resignation: %s", d.Do)
	}
}
