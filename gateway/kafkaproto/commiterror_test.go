package kafkaproto

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/api"
)

// TestCommitRefusedForAFullStateIsMetadataTooLarge: a commit whose
// metadata would take the coordinator's state past state_bytes is
// refused limit_exceeded (coordinator/group admitState); a Kafka client
// reads it as OFFSET_METADATA_TOO_LARGE on that partition, classic and
// KIP-848 alike — before, UNKNOWN_SERVER_ERROR.
func TestCommitRefusedForAFullStateIsMetadataTooLarge(t *testing.T) {
	for _, kip848 := range []bool{false, true} {
		if got := commitError(api.CodeLimitExceeded, kip848); got != kerr.OffsetMetadataTooLarge.Code {
			t.Fatalf("kip848 %v: limit_exceeded answers %v, want OFFSET_METADATA_TOO_LARGE", kip848, kerr.ErrorForCode(got))
		}
	}
}

// TestOffsetRegressionIsPolicyViolation: a commit below the committed
// offset (capgate's rule, not a malformed commit) answers
// POLICY_VIOLATION, final in kgo, KafkaJS and librdkafka — before,
// INVALID_COMMIT_OFFSET_SIZE ("The committing offset data size is not
// valid").
func TestOffsetRegressionIsPolicyViolation(t *testing.T) {
	for _, kip848 := range []bool{false, true} {
		got := commitError(api.CodeOffsetRegression, kip848)
		if got != kerr.PolicyViolation.Code || kerr.IsRetriable(kerr.ErrorForCode(got)) {
			t.Fatalf("kip848 %v: offset_regression answers %v, want POLICY_VIOLATION (not retriable)", kip848, kerr.ErrorForCode(got))
		}
	}
}

// TestResetCommandNamesWhatTheClientAskedFor: the command logged for a
// refused commit resets to what the client asked — Kafka's sentinels
// -2 and -1 (KafkaJS's resetOffsets earliest / latest) are --to earliest
// and latest, an offset itself.
func TestResetCommandNamesWhatTheClientAskedFor(t *testing.T) {
	for offset, to := range map[int64]string{-2: "earliest", -1: "latest", 0: "0", 42: "42", -7: "earliest|latest|OFFSET"} {
		want := "capgate admin offsets reset g orders 3 --to " + to
		if got := resetCommand("g", "orders", 3, offset); got != want {
			t.Errorf("offset %d: %q, want %q", offset, got, want)
		}
	}
}

// TestCommitPolicyLogIsBounded: a flood of refused commits logs a burst
// at INFO, then counts; the next line allowed says how many it left out.
func TestCommitPolicyLogIsBounded(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	l := newCommitPolicyLog(zap.New(core))
	now := time.Now()
	r := refusedCommit{group: "g", topic: "orders", partition: 1, offset: -2, committed: 5}
	for range 1000 {
		l.refused(r, nil, now)
	}
	if logs.Len() != commitPolicyBurst {
		t.Fatalf("%d lines for 1,000 refusals, want the burst of %d", logs.Len(), commitPolicyBurst)
	}
	first := logs.All()[0]
	if f := first.ContextMap(); first.Level != zap.InfoLevel || f["committed"] != int64(5) || f["refused_offset"] != int64(-2) ||
		f["instead"] != "capgate admin offsets reset g orders 1 --to earliest" {
		t.Fatalf("line %v %q %v", first.Level, first.Message, f)
	}
	l.refused(r, nil, now.Add(time.Second))
	last := logs.All()[logs.Len()-1]
	if n, _ := last.ContextMap()["suppressed"].(int64); n != 1000-commitPolicyBurst {
		t.Fatalf("suppressed %v, want %d", last.ContextMap()["suppressed"], 1000-commitPolicyBurst)
	}
}
