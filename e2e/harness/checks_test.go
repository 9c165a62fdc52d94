package harness_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/e2e/harness"
)

// ms is a point on a hand-made timeline.
func ms(n int) harness.Time { return harness.Time(1e12 + int64(n)*int64(time.Millisecond)) }

var key = harness.PartitionKey{Group: "g", Topic: "orders", Partition: 0}

func params() harness.Params {
	return harness.Params{
		SessionTimeout: 1500 * time.Millisecond, HandoffTimeout: 3 * time.Second, GatewayTimeout: 3 * time.Second,
		MaxClockSkew: 500 * time.Millisecond, Leeway: time.Second, TraceSlack: 5 * time.Millisecond,
	}
}

// cleanHandoff is a log of a clean handoff of orders/0 from member A
// (epoch 1) to B (epoch 2) through one gateway: ten records produced, A
// reads 0–7 and commits 5, the coordinator fences epoch 2, gw1 applies and
// acknowledges it, A releases at 8, B is granted epoch 2 at 8 and reads
// 8–9. Every checker passes on it; each test below breaks one invariant.
func cleanHandoff() harness.Snapshot {
	s := harness.Snapshot{}
	for o := range 10 {
		s.Produced = append(s.Produced, harness.Produced{Topic: "orders", Partition: 0, Offset: int64(o), Value: fmt.Sprint("v", o), At: ms(o)})
	}
	fence := []api.Fence{{Group: "g", Topic: "orders", Partition: 0, Epoch: 2}}
	s.SyncAnswers = []harness.SyncAnswer{
		{Gateway: "gw1", Seq: 1, Reset: true, At: ms(5)},
		{Gateway: "gw1", Seq: 2, Fences: fence, At: ms(105)},
	}
	s.SyncPolls = []harness.SyncPoll{
		{Gateway: "gw1", After: 0, Arrived: ms(1), Forwarded: ms(1)},
		{Gateway: "gw1", After: 1, Arrived: ms(6), Forwarded: ms(6)},
		{Gateway: "gw1", After: 2, Arrived: ms(107), Forwarded: ms(107)},
	}
	s.Grants = []harness.Grant{
		{Consumer: "a", Member: "A", Key: key, Epoch: 1, Offset: 0, Expires: ms(10000), At: ms(10)},
		{Consumer: "b", Member: "B", Key: key, Epoch: 2, Offset: 8, Expires: ms(10000), At: ms(120)},
	}
	s.Fetches = []harness.Fetch{
		{Gateway: "gw1", Key: key, Holder: "A", Epoch: 1, Outcome: "ok", Offset: 0, Next: 5, Start: ms(20), End: ms(30)},
		{Gateway: "gw1", Key: key, Holder: "A", Epoch: 1, Outcome: "ok", Offset: 5, Next: 8, Start: ms(40), End: ms(50)},
		{Gateway: "gw1", Key: key, Holder: "A", Epoch: 1, Outcome: "capability_revoked", Offset: 8, Start: ms(60), End: ms(106)},
		{Gateway: "gw1", Key: key, Holder: "B", Epoch: 2, Outcome: "ok", Offset: 8, Next: 10, Start: ms(130), End: ms(140)},
	}
	for o := range 8 {
		s.Deliveries = append(s.Deliveries, harness.Delivery{Consumer: "a", Member: "A", Key: key, Epoch: 1, Offset: int64(o), Value: fmt.Sprint("v", o), At: ms(31 + o)})
	}
	for o := 8; o < 10; o++ {
		s.Deliveries = append(s.Deliveries, harness.Delivery{Consumer: "b", Member: "B", Key: key, Epoch: 2, Offset: int64(o), Value: fmt.Sprint("v", o), At: ms(141 + o)})
	}
	s.Calls = []harness.Call{
		{Consumer: "a", Member: "A", Op: "heartbeat", Status: 200, Sent: ms(90), Done: ms(100)},
		{Consumer: "b", Member: "B", Op: "heartbeat", Status: 200, Sent: ms(95), Done: ms(120)},
	}
	s.Commits = []harness.Commit{
		{Consumer: "a", Member: "A", Key: key, Epoch: 1, Offset: 5, Status: 200, Answered: true, Sent: ms(35), Done: ms(36)},
		{Consumer: "a", Member: "A", Key: key, Epoch: 1, Offset: 8, Release: true, Status: 200, Answered: true, Sent: ms(108), Done: ms(109)},
	}
	s.Partitions = []harness.PartitionState{
		{Key: key, Epoch: 1, State: "owned", Owner: "A", Committed: 5, At: ms(90)},
		{Key: key, Epoch: 2, State: "revoking", Owner: "A", Committed: 5, At: ms(110)},
		{Key: key, Epoch: 2, State: "owned", Owner: "B", Committed: 8, At: ms(150)},
	}
	return s
}

func TestCleanHandoffPassesEveryChecker(t *testing.T) {
	s := cleanHandoff()
	s.Sort()
	if v := harness.CheckAll(s, params()); len(v) > 0 {
		t.Fatalf("violations on a clean log: %v", v)
	}
}

// fires fails t unless violations hold one of invariant mentioning want.
func fires(t *testing.T, violations []harness.Violation, invariant, want string) {
	t.Helper()
	for _, v := range violations {
		if v.Invariant == invariant && strings.Contains(v.Detail, want) {
			t.Logf("fired: %s", v)
			return
		}
	}
	t.Fatalf("checker %q did not fire with %q; got %v", invariant, want, violations)
}

func sorted(s harness.Snapshot) harness.Snapshot {
	s.Sort()
	return s
}

func TestExclusiveReaderFires(t *testing.T) {
	s := cleanHandoff()
	// A zombie fetch at another gateway served A's epoch 1 while B read.
	s.Fetches = append(s.Fetches, harness.Fetch{Gateway: "gw2", Key: key, Holder: "A", Epoch: 1, Outcome: "ok", Offset: 8, Start: ms(125), End: ms(139)})
	fires(t, harness.CheckExclusiveReader(sorted(s), params()), harness.InvExclusiveReader, "overlaps A@ep1 served at gw2")
}

func TestExclusiveReaderToleratesTraceSlack(t *testing.T) {
	s := cleanHandoff()
	s.Fetches = append(s.Fetches, harness.Fetch{Gateway: "gw2", Key: key, Holder: "A", Epoch: 1, Outcome: "ok", Offset: 8, Start: ms(100), End: ms(133)})
	if v := harness.CheckExclusiveReader(sorted(s), params()); len(v) > 0 {
		t.Fatalf("an overlap within TraceSlack fired: %v", v)
	}
}

func TestEpochsRiseFiresOnFallingEpoch(t *testing.T) {
	s := cleanHandoff()
	s.Partitions = append(s.Partitions, harness.PartitionState{Key: key, Epoch: 1, State: "owned", Owner: "B", Committed: 8, At: ms(200)})
	fires(t, harness.CheckEpochsRise(sorted(s)), harness.InvEpochsRise, "epoch 1 after 2")
}

func TestEpochsRiseFiresOnReusedEpoch(t *testing.T) {
	s := cleanHandoff()
	s.Grants = append(s.Grants, harness.Grant{Consumer: "c", Member: "C", Key: key, Epoch: 2, Offset: 8, Expires: ms(10000), At: ms(300)})
	fires(t, harness.CheckEpochsRise(sorted(s)), harness.InvEpochsRise, "epoch 2 granted to C")
}

func TestEpochsRiseFiresOnFallingFence(t *testing.T) {
	s := cleanHandoff()
	s.SyncAnswers = append(s.SyncAnswers, harness.SyncAnswer{Gateway: "gw1", Seq: 9, Reset: true,
		Fences: []api.Fence{{Group: "g", Topic: "orders", Partition: 0, Epoch: 1}}, At: ms(400)})
	fires(t, harness.CheckEpochsRise(sorted(s)), harness.InvEpochsRise, "sent fence 1")
}

func TestNoAdmitAfterAckFires(t *testing.T) {
	s := cleanHandoff()
	// gw1 acknowledged fence 2 at 107 and still served epoch 1 at 200.
	s.Fetches = append(s.Fetches, harness.Fetch{Gateway: "gw1", Key: key, Holder: "A", Epoch: 1, Outcome: "ok", Offset: 8, Start: ms(200), End: ms(201)})
	fires(t, harness.CheckNoAdmitAfterAck(sorted(s), params()), harness.InvNoAdmitAfterAck, "after acknowledging fence 2")
}

func TestNoAdmitAfterAckFiresOnFetchNotCancelled(t *testing.T) {
	s := cleanHandoff()
	// Started before the ack, but served long after it: the fence did not
	// cancel it.
	s.Fetches = append(s.Fetches, harness.Fetch{Gateway: "gw1", Key: key, Holder: "A", Epoch: 1, Outcome: "ok", Offset: 8, Start: ms(100), End: ms(118)})
	fires(t, harness.CheckNoAdmitAfterAck(sorted(s), params()), harness.InvNoAdmitAfterAck, "after acknowledging fence 2")
}

func TestGrantAfterSafeFiresOnUnackedGateway(t *testing.T) {
	s := cleanHandoff()
	s.SyncPolls[2].Arrived, s.SyncPolls[2].Forwarded = ms(125), ms(125) // the ack came after B's grant
	fires(t, harness.CheckGrantAfterSafe(sorted(s), params()), harness.InvGrantAfterSafe, "gateway gw1 had acknowledged only fence 0")
}

func TestGrantAfterSafeAcceptsSilentGateway(t *testing.T) {
	s := cleanHandoff()
	s.SyncAnswers = s.SyncAnswers[:1]
	s.SyncPolls = s.SyncPolls[:2] // gw1 went silent at 6ms
	grantBAt3100(&s)
	if v := harness.CheckGrantAfterSafe(sorted(s), params()); len(v) > 0 {
		t.Fatalf("a gateway silent for gateway_timeout counted as unsafe: %v", v)
	}
}

// A gateway cut off from the leader alone polls the standbys, which
// answer not_leader: the coordinator does not hear it, and counts it
// safe after gateway_timeout of silence (the gateway refuses everything
// itself sync_timeout after its last answered poll). Its polls to the
// standbys are no sign of life to the coordinator; counted as one, a
// grant the coordinator rightly made was reported unsafe.
func TestGrantAfterSafeAcceptsGatewayHeardOnlyByStandbys(t *testing.T) {
	s := cleanHandoff()
	s.SyncAnswers = s.SyncAnswers[:1]
	s.SyncPolls = s.SyncPolls[:2] // gw1 cut from the leader at 6ms
	for at := 500; at < 3100; at += 500 {
		s.SyncPolls = append(s.SyncPolls, harness.SyncPoll{Gateway: "gw1", After: 1, Arrived: ms(at), Forwarded: ms(at), NotLeader: true})
	}
	grantBAt3100(&s)
	if v := harness.CheckGrantAfterSafe(sorted(s), params()); len(v) > 0 {
		t.Fatalf("a gateway heard only by standbys (not_leader) for gateway_timeout counted as unsafe: %v", v)
	}
	s.SyncPolls[len(s.SyncPolls)-1].NotLeader = false // the leader heard it at 3000ms
	fires(t, harness.CheckGrantAfterSafe(sorted(s), params()), harness.InvGrantAfterSafe, "gateway gw1 had acknowledged only fence 0")
}

// A gateway that shuts down cleanly stops serving, then leaves (POST
// /v1/sync/leave), and the coordinator waits for it no more: a grant
// after the leave, the fence unacknowledged, is safe; reported unsafe,
// a rolling restart of the gateways with a leader failing in it showed
// 150 false violations. A gateway that polls again after its leave (a
// restart) is a new one and must acknowledge the fence itself.
func TestGrantAfterSafeAcceptsGatewayThatLeft(t *testing.T) {
	s := cleanHandoff()
	s.SyncPolls[2].Arrived, s.SyncPolls[2].Forwarded = ms(125), ms(125) // the ack came after B's grant
	fires(t, harness.CheckGrantAfterSafe(sorted(s), params()), harness.InvGrantAfterSafe, "gateway gw1 had acknowledged only fence 0")
	s.SyncPolls = s.SyncPolls[:2]
	s.GatewayLeaves = []harness.GatewayLeave{{Gateway: "gw1", Sent: ms(50)}}
	if v := harness.CheckGrantAfterSafe(sorted(s), params()); len(v) > 0 {
		t.Fatalf("a gateway that left before the grant counted as unsafe: %v", v)
	}
	s.SyncPolls = append(s.SyncPolls, harness.SyncPoll{Gateway: "gw1", After: 0, Arrived: ms(80), Forwarded: ms(80)}) // back, as new
	fires(t, harness.CheckGrantAfterSafe(sorted(s), params()), harness.InvGrantAfterSafe, "gateway gw1 had acknowledged only fence 0")
}

// grantBAt3100 moves B's grant, fetch and deliveries to 3100 ms on.
func grantBAt3100(s *harness.Snapshot) {
	s.Grants[1].At = ms(3100)
	s.Fetches[3].Start, s.Fetches[3].End = ms(3110), ms(3120)
	for i := range s.Deliveries[8:] {
		s.Deliveries[8+i].At = ms(3121 + i)
	}
}

func TestGrantAfterSafeFiresOnUnreleasedHolder(t *testing.T) {
	s := cleanHandoff()
	s.Commits = s.Commits[:1] // A never released; alive (heartbeat at 90), handoff started after 90
	fires(t, harness.CheckGrantAfterSafe(sorted(s), params()), harness.InvGrantAfterSafe, "A neither released, left nor died")
}

func TestNoLostRecordsFires(t *testing.T) {
	s := cleanHandoff()
	s.Deliveries = s.Deliveries[:len(s.Deliveries)-1]
	fires(t, harness.CheckNoLostRecords(sorted(s), "g"), harness.InvNoLostRecord, "1 acknowledged records never delivered")
}

// TestNoLostRecordsTellsSkippedFromUnread: a record never delivered is
// named skipped when an accepted commit is past it (a real loss) and
// unread when every accepted commit is at or before it (a stall).
func TestNoLostRecordsTellsSkippedFromUnread(t *testing.T) {
	s := cleanHandoff()
	s.Deliveries = s.Deliveries[:len(s.Deliveries)-2] // B read none of 8–9
	fires(t, harness.CheckNoLostRecords(sorted(s), "g"), harness.InvNoLostRecord, "highest commit accepted 8: unread, not skipped")
	s.Commits = append(s.Commits, harness.Commit{Consumer: "b", Member: "B", Key: key, Epoch: 2, Offset: 10, Status: 200, Answered: true, Sent: ms(160), Done: ms(161)})
	fires(t, harness.CheckNoLostRecords(sorted(s), "g"), harness.InvNoLostRecord, "SKIPPED: a commit of 10 was accepted past offset 8")
}

func TestNoLostRecordsFiresOnWrongData(t *testing.T) {
	s := cleanHandoff()
	s.Deliveries[9].Value = "v8"
	fires(t, harness.CheckNoLostRecords(sorted(s), "g"), harness.InvNoLostRecord, `got "v8", produced "v9"`)
}

func TestCommittedOffsetsFireOnRegression(t *testing.T) {
	s := cleanHandoff()
	s.Partitions = append(s.Partitions, harness.PartitionState{Key: key, Epoch: 2, State: "owned", Owner: "B", Committed: 3, At: ms(300)})
	fires(t, harness.CheckCommittedOffsets(sorted(s), params()), harness.InvCommittedForward, "committed 3 after 8")
}

func TestCommittedOffsetsFireOnAcceptedLowerCommit(t *testing.T) {
	s := cleanHandoff()
	s.Commits = append(s.Commits, harness.Commit{Consumer: "b", Member: "B", Key: key, Epoch: 2, Offset: 6, Status: 200, Answered: true, Sent: ms(160), Done: ms(161)})
	fires(t, harness.CheckCommittedOffsets(sorted(s), params()), harness.InvCommittedForward, "commit of 6 by B@ep2 accepted after commit of 8")
}

// TestCommittedOffsetsAllowAReleaseWithoutAnOffset: a member that
// releases a partition it never read (offset -1: nothing to commit)
// leaves the committed offset where it was — no regression (an e2e/ha
// bulk revoke's new members released so after a takeover, and this
// checker called it "commit of -1 accepted after commit of 0").
func TestCommittedOffsetsAllowAReleaseWithoutAnOffset(t *testing.T) {
	s := cleanHandoff()
	s.Commits = append(s.Commits, harness.Commit{Consumer: "b", Member: "B", Key: key, Epoch: 2, Offset: -1, Release: true, Status: 200, Answered: true, Sent: ms(160), Done: ms(161)})
	if v := harness.CheckCommittedOffsets(sorted(s), params()); len(v) > 0 {
		t.Fatalf("a release without an offset fired: %v", v)
	}
}

func TestCommittedOffsetsFireOnWrongStart(t *testing.T) {
	s := cleanHandoff()
	s.Grants[1].Offset = 5 // B should start at A's release, 8
	fires(t, harness.CheckCommittedOffsets(sorted(s), params()), harness.InvCommittedForward, "below the offset 8 committed under an older epoch")
	s = cleanHandoff()
	s.Grants[1].Offset = 9
	fires(t, harness.CheckCommittedOffsets(sorted(s), params()), harness.InvCommittedForward, "beyond the highest offset 8")
}

func TestCommittedOffsetsAllowUnansweredCommit(t *testing.T) {
	s := cleanHandoff()
	// A's release went out but A died before the answer: the coordinator
	// may have accepted it, so B may start there.
	s.Commits[1] = harness.Commit{Consumer: "a", Member: "A", Key: key, Epoch: 1, Offset: 8, Release: true, Sent: ms(108)}
	if v := harness.CheckCommittedOffsets(sorted(s), params()); len(v) > 0 {
		t.Fatalf("a start at an unanswered commit fired: %v", v)
	}
}

func TestDuplicatesFireOnCleanHandoff(t *testing.T) {
	s := cleanHandoff()
	s.Deliveries = append(s.Deliveries, harness.Delivery{Consumer: "b", Member: "B", Key: key, Epoch: 2, Offset: 7, Value: "v7", At: ms(142)})
	fires(t, harness.CheckDuplicates(sorted(s), params()), harness.InvDuplicates, "clean handoff A@ep1 → B@ep2 repeated 1 records")
}

func TestDuplicatesBoundedAfterCrash(t *testing.T) {
	s := cleanHandoff()
	// A crashed after committing 5: B starts at 5 and repeats 5, 6, 7 —
	// the three records A delivered after its last commit.
	s.Commits = s.Commits[:1]
	s.Grants[1].Offset = 5
	for o := 5; o < 8; o++ {
		s.Deliveries = append(s.Deliveries, harness.Delivery{Consumer: "b", Member: "B", Key: key, Epoch: 2, Offset: int64(o), Value: fmt.Sprint("v", o), At: ms(140 + o)})
	}
	if v := harness.CheckDuplicates(sorted(s), params()); len(v) > 0 {
		t.Fatalf("duplicates within the crash bound fired: %v", v)
	}
	// One more repeat (offset 4, committed before the crash) is beyond it.
	s.Deliveries = append(s.Deliveries, harness.Delivery{Consumer: "b", Member: "B", Key: key, Epoch: 2, Offset: 4, Value: "v4", At: ms(160)})
	fires(t, harness.CheckDuplicates(sorted(s), params()), harness.InvDuplicates, "4 records delivered more than once, but unclean handoffs allow only 3")
}
