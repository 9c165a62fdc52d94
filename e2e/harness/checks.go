package harness

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// Params are the settings the checkers judge timing against: the
// cluster's (Timing.Params gives them) plus the checkers' own tolerance.
type Params struct {
	// SessionTimeout is the members' session timeout.
	SessionTimeout time.Duration
	// HandoffTimeout, GatewayTimeout and MaxClockSkew are the
	// coordinator's groups settings.
	HandoffTimeout time.Duration
	GatewayTimeout time.Duration
	MaxClockSkew   time.Duration
	// Leeway is the gateways' token leeway.
	Leeway time.Duration
	// TraceSlack bounds how long a gateway's fetch handler may run after
	// its last decision before its trace line's end (encoding the answer,
	// being descheduled on a loaded machine). A trace line's End is taken
	// after the in-flight registry let the fetch go, so an ack or a grant
	// may legitimately precede End by this much, never more.
	TraceSlack time.Duration
	// LogStart is the first offset of every partition (0: no retention).
	LogStart int64
}

// DefaultTraceSlack is the TraceSlack Timing.Params uses.
const DefaultTraceSlack = 250 * time.Millisecond

// Violation is one breach of an invariant.
type Violation struct {
	Invariant string
	At        Time
	Detail    string
}

func (v Violation) String() string { return fmt.Sprintf("%s at %s: %s", v.Invariant, v.At, v.Detail) }

// The invariants, as Violation.Invariant names them.
const (
	InvExclusiveReader  = "exclusive reader"
	InvEpochsRise       = "epochs only rise"
	InvNoAdmitAfterAck  = "no admit after ack"
	InvGrantAfterSafe   = "grant after safe"
	InvNoLostRecord     = "no lost record"
	InvCommittedForward = "committed offsets only advance"
	InvDuplicates       = "duplicates bounded"
)

// CheckAll runs the seven checkers; CheckNoLostRecords runs for every
// group of the snapshot, so call it after the consumers drained.
func CheckAll(s Snapshot, p Params) []Violation {
	var out []Violation
	out = append(out, CheckExclusiveReader(s, p)...)
	out = append(out, CheckEpochsRise(s)...)
	out = append(out, CheckNoAdmitAfterAck(s, p)...)
	out = append(out, CheckGrantAfterSafe(s, p)...)
	for _, g := range s.Groups() {
		out = append(out, CheckNoLostRecords(s, g)...)
	}
	out = append(out, CheckCommittedOffsets(s, p)...)
	out = append(out, CheckDuplicates(s, p)...)
	return out
}

// RequireInvariants fails t with every violation CheckAll finds (at most
// 10 per invariant) and logs what the checkers looked at.
func RequireInvariants(t testing.TB, s Snapshot, p Params) {
	t.Helper()
	t.Logf("checked %d fetches (%d ok), %d grants, %d commits, %d deliveries, %d produced, %d sync answers, %d sync polls, %d observations, %d faults",
		len(s.Fetches), countOK(s.Fetches), len(s.Grants), len(s.Commits), len(s.Deliveries), len(s.Produced),
		len(s.SyncAnswers), len(s.SyncPolls), len(s.Partitions), len(s.Faults))
	shown := map[string]int{}
	for _, v := range CheckAll(s, p) {
		shown[v.Invariant]++
		if shown[v.Invariant] <= 10 {
			t.Errorf("invariant violated: %s", v)
		}
	}
	for inv, n := range shown {
		if n > 10 {
			t.Errorf("invariant %q: %d violations in all", inv, n)
		}
	}
}

func countOK(fs []Fetch) int {
	n := 0
	for _, f := range fs {
		if f.OK() {
			n++
		}
	}
	return n
}

// CheckExclusiveReader: for each (group, topic, partition), the fetches
// gateways admitted and served (outcome ok, trace interval Start..End) for
// different holders never overlap in time. The bound is TraceSlack, the
// tail of a handler after its last decision, and nothing else — also when
// a gateway is cut off: a gateway without a good sync for sync_timeout
// refuses everything itself, and the coordinator counts it safe only after
// gateway_timeout > sync_timeout + max_clock_skew of silence, so its last
// admitted fetch was decided before the next holder's grant. (On one
// machine all parts share one clock; across machines add max_clock_skew.)
func CheckExclusiveReader(s Snapshot, p Params) []Violation {
	var out []Violation
	for key, fetches := range okFetchesByKey(s.Fetches) {
		var active []Fetch // served fetches that may still overlap the next one
		for _, f := range fetches {
			active = slices.DeleteFunc(active, func(o Fetch) bool { return o.End <= f.Start })
			for _, o := range active {
				overlap := min(o.End, f.End).Sub(f.Start)
				if o.Holder != f.Holder && overlap > p.TraceSlack {
					out = append(out, Violation{InvExclusiveReader, f.Start, fmt.Sprintf(
						"%s: %s@ep%d served at %s %s..%s overlaps %s@ep%d served at %s %s..%s by %v",
						key, f.Holder, f.Epoch, f.Gateway, f.Start, f.End, o.Holder, o.Epoch, o.Gateway, o.Start, o.End, overlap)})
				}
			}
			active = append(active, f)
		}
	}
	return out
}

// okFetchesByKey groups the served fetches of group capabilities by
// partition, in start order.
func okFetchesByKey(fetches []Fetch) map[PartitionKey][]Fetch {
	out := map[PartitionKey][]Fetch{}
	for _, f := range fetches {
		if f.OK() && f.Key.Group != "" {
			out[f.Key] = append(out[f.Key], f)
		}
	}
	for _, fs := range out {
		slices.SortStableFunc(fs, func(a, b Fetch) int { return cmp.Compare(a.Start, b.Start) })
	}
	return out
}

// CheckEpochsRise: a partition's epoch never falls and is never reused,
// across coordinator restarts: the coordinator's observed epoch of each
// partition never goes down; no epoch is granted to two members; and the
// fence a gateway is sent for a partition never goes down.
func CheckEpochsRise(s Snapshot) []Violation {
	var out []Violation
	observed := map[PartitionKey]PartitionState{}
	for _, o := range s.Partitions {
		if last, ok := observed[o.Key]; ok && o.Epoch < last.Epoch {
			out = append(out, Violation{InvEpochsRise, o.At, fmt.Sprintf("%s: coordinator shows epoch %d after %d (at %s)", o.Key, o.Epoch, last.Epoch, last.At)})
		}
		if o.Epoch >= observed[o.Key].Epoch {
			observed[o.Key] = o
		}
	}
	type epochKey struct {
		key   PartitionKey
		epoch uint64
	}
	holder := map[epochKey]Grant{}
	for _, g := range s.Grants {
		k := epochKey{g.Key, g.Epoch}
		if first, ok := holder[k]; ok && first.Member != g.Member {
			out = append(out, Violation{InvEpochsRise, g.At, fmt.Sprintf("%s: epoch %d granted to %s (%s) and to %s (%s at %s)",
				g.Key, g.Epoch, g.Member, g.Consumer, first.Member, first.Consumer, first.At)})
		} else if !ok {
			holder[k] = g
		}
	}
	return append(out, checkFencesRise(s.SyncAnswers)...)
}

func checkFencesRise(answers []SyncAnswer) []Violation {
	var out []Violation
	type gatewayKey struct {
		gateway string
		key     PartitionKey
	}
	sent := map[gatewayKey]uint64{}
	for _, a := range answers {
		for _, f := range a.Fences {
			k := gatewayKey{a.Gateway, fenceKey(f)}
			if last := sent[k]; f.Epoch < last {
				out = append(out, Violation{InvEpochsRise, a.At, fmt.Sprintf("%s: %s sent fence %d at seq %d (reset %v) after fence %d",
					k.key, a.Gateway, f.Epoch, a.Seq, a.Reset, last)})
			}
			sent[k] = max(sent[k], f.Epoch)
		}
	}
	return out
}

// fenceAck is a fence a gateway acknowledged: it had applied fence
// epoch for key by at.
type fenceAck struct {
	epoch uint64
	at    Time
}

// gatewayAcks replays one gateway's sync traffic: which fence each
// partition had acknowledged, and when. at picks the poll's time that
// counts (arrival at the tap, or forwarding to the coordinator).
func gatewayAcks(s Snapshot, gateway string, at func(SyncPoll) Time) map[PartitionKey][]fenceAck {
	var answers []SyncAnswer
	for _, a := range s.SyncAnswers {
		if a.Gateway == gateway {
			answers = append(answers, a)
		}
	}
	acks := map[PartitionKey][]fenceAck{}
	next := 0 // answers[:next] arrived before the current poll
	var received []SyncAnswer
	for _, poll := range s.SyncPolls { // in arrival order
		when := at(poll)
		if poll.Gateway != gateway || when == 0 {
			continue
		}
		for ; next < len(answers) && answers[next].At < poll.Arrived; next++ {
			received = append(received, answers[next])
		}
		kept := received[:0]
		for _, a := range received {
			if poll.After == 0 || a.Seq > poll.After {
				kept = append(kept, a) // not acknowledged (yet)
				continue
			}
			for _, f := range a.Fences {
				k := fenceKey(f)
				if list := acks[k]; len(list) == 0 || list[len(list)-1].epoch < f.Epoch {
					acks[k] = append(list, fenceAck{f.Epoch, when})
				}
			}
		}
		received = kept
	}
	return acks
}

// ackedFence is the highest fence of list acknowledged before t (0 if
// none).
func ackedFence(list []fenceAck, t Time) (uint64, Time) {
	var epoch uint64
	var at Time
	for _, a := range list {
		if a.at < t && a.epoch > epoch {
			epoch, at = a.epoch, a.at
		}
	}
	return epoch, at
}

// CheckNoAdmitAfterAck: once a gateway acknowledged fence e+1 for a
// partition (it polled with after ≥ the seq of an answer carrying it), it
// serves no fetch at epoch ≤ e: none that started after the ack, and none
// that ended more than TraceSlack after it (a fetch in flight at the fence
// is cancelled before the gateway acks).
func CheckNoAdmitAfterAck(s Snapshot, p Params) []Violation {
	var out []Violation
	acks := map[string]map[PartitionKey][]fenceAck{}
	arrived := func(poll SyncPoll) Time { return poll.Arrived }
	for _, f := range s.Fetches {
		if !f.OK() || f.Key.Group == "" {
			continue
		}
		if acks[f.Gateway] == nil {
			acks[f.Gateway] = gatewayAcks(s, f.Gateway, arrived)
		}
		cutoff := max(f.Start, f.End.Add(-p.TraceSlack))
		if fence, at := ackedFence(acks[f.Gateway][f.Key], cutoff); f.Epoch < fence {
			out = append(out, Violation{InvNoAdmitAfterAck, f.Start, fmt.Sprintf(
				"%s: %s served %s@ep%d %s..%s after acknowledging fence %d at %s", f.Key, f.Gateway, f.Holder, f.Epoch, f.Start, f.End, fence, at)})
		}
	}
	return out
}

func fenceKey(f api.Fence) PartitionKey {
	return PartitionKey{Group: f.Group, Topic: f.Topic, Partition: f.Partition}
}
