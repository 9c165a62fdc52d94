package client

import (
	"errors"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/api"
)

// TestReleaseOfAGoneMemberIsNoWarning: after an administrator revoked a
// member, each of its release commits is refused unknown_member — and
// each was logged as a warning that "the coordinator moves the partition
// after its handoff timeout", which no handoff does: the partitions were
// fenced with the member. A release refused otherwise still warns.
func TestReleaseOfAGoneMemberIsNoWarning(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	c := &Consumer{log: zap.New(core)}
	release := api.CommitRequest{Release: true, Offsets: []api.CommitOffset{{Topic: "demo", Partition: 3, Offset: 7}}}
	c.logCommit(release, &Error{Op: "commit", Code: api.CodeUnknownMember, Status: 409, Message: "member revoked by an administrator: join again"})
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 0 {
		t.Fatalf("a gone member's release logged %d warnings", n)
	}
	c.logCommit(release, errors.New("dial tcp: connection refused"))
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
		t.Fatalf("a failed release logged %d warnings, want 1", n)
	}
}
