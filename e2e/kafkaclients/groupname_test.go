package kafkaclients

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupIDsCapgateCannotNameAreRefused: a Kafka client's group id
// that is no capgate group name — "." and ".." (an HTTP path drops them:
// the coordinator's join never sees the group), a "/" or a space in it
// — was taken, and the group calls failed with an unexplained error.
// Now FindCoordinator answers INVALID_GROUP_ID, final in every client.
func TestGroupIDsCapgateCannotNameAreRefused(t *testing.T) {
	s := Start(t, Options{Partitions: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cred, err := s.Stack.ClientCredential(ctx, "names", []string{"*"}, []string{"orders"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cl := kgoClient(t, s.KafkaAddrs(), cred, true)
	for _, group := range []string{".", "..", "a/b", "a b"} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("FindCoordinator %q: %v", group, err)
		}
		code := resp.ErrorCode
		if len(resp.Coordinators) > 0 {
			code = resp.Coordinators[0].ErrorCode
		}
		if !errors.Is(kerr.ErrorForCode(code), kerr.InvalidGroupID) {
			t.Errorf("FindCoordinator %q: error %v, want INVALID_GROUP_ID", group, kerr.ErrorForCode(code))
		}
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = "good", []string{"good"}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("FindCoordinator of a good name: %v %+v", err, resp)
	}
}
