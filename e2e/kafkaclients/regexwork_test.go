package kafkaclients

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSlowTopicRegexRefused: a KIP-848 SubscribedTopicRegex from a
// credential for some topics is matched by the listener over its whole
// topic list, on the heartbeat's goroutine, at each join — and a regex
// matching no allowed topic is answered UNKNOWN_TOPIC_OR_PARTITION, so a
// client sends it again and again. `(.?){60}x` (9 bytes, within the cost
// bound) fails slowly on every name: ~6,000 steps over a 40-character
// name, 1.1 s of a core over 10,000 (redteam18). Over 1,000 such topics
// it is refused INVALID_REGULAR_EXPRESSION saying it takes too many
// steps (before: UNKNOWN_TOPIC_OR_PARTITION, every time, after the whole
// scan), while a regex people write is matched as before; the match is
// paid in the credential's steps, so another slow regex of it at once is
// not run (COORDINATOR_NOT_AVAILABLE, retriable), and another
// credential's regex is matched beside it.
func TestSlowTopicRegexRefused(t *testing.T) {
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("team-%04d.service-events.orders-v%d", i, i%7)
	}
	s := startWithTopics(t, names)
	group := "regex-work"
	r := rawAs(t, s, regexCredential(t, s, "regex", []string{group}, []string{"billing-*"}))
	heartbeat := func(regex string) (int16, string) { return regexJoin(r, group, regex) }
	// Once the listener's topic list holds the 1,000 (before, the regex
	// matches none the credential allows: UNKNOWN_TOPIC_OR_PARTITION;
	// COORDINATOR_NOT_AVAILABLE while the credential pays for a match).
	var answered time.Time
	for deadline := time.Now().Add(time.Minute); ; {
		code, msg := heartbeat(`(.?){60}x`)
		answered = time.Now()
		if code == kerr.InvalidRegularExpression.Code && strings.Contains(msg, "steps") {
			break
		}
		if code != kerr.UnknownTopicOrPartition.Code && code != kerr.CoordinatorNotAvailable.Code || time.Now().After(deadline) {
			t.Fatalf("(.?){60}x over 1,000 topics: error %d %q, want INVALID_REGULAR_EXPRESSION saying it takes too many steps", code, msg)
		}
	}
	// The match that went over is paid in the credential's steps (about
	// a second of them): another slow regex of it, sent at once, is not
	// run. (Past half a second the check is moot: it may have paid.)
	sent := time.Now()
	if code, msg := heartbeat(`(.?){60}y`); sent.Sub(answered) < 500*time.Millisecond &&
		(code != kerr.CoordinatorNotAvailable.Code || !strings.Contains(msg, "steps a second")) {
		t.Errorf("another slow regex of the same credential at once: error %d %q, want COORDINATOR_NOT_AVAILABLE saying its matching is paced", code, msg)
	}
	// Another credential is not held by that one's debt.
	rb := rawAs(t, s, regexCredential(t, s, "regex-b", []string{group}, []string{"billing-*"}))
	if code, msg := regexJoin(rb, group, `team-0.*`); code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("another credential's regex: error %d %q, want UNKNOWN_TOPIC_OR_PARTITION (no topic billing-* allows)", code, msg)
	}
}

// regexJoin sends a KIP-848 join (member epoch 0) of group subscribing
// to regex on r, and answers its error code and message.
func regexJoin(r *rawConn, group, regex string) (int16, string) {
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.SetVersion(1)
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = group, "raw-member", 0, 5000
	hb.SubscribedTopicRegex, hb.Topics = kmsg.StringPtr(regex), []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp := r.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorMessage == nil {
		return resp.ErrorCode, ""
	}
	return resp.ErrorCode, *resp.ErrorMessage
}

// startWithTopics starts a stack of one-partition topics and creates
// topics (one partition each) in Kafka itself.
func startWithTopics(t *testing.T, topics []string) *Stack {
	t.Helper()
	s := Start(t, Options{Partitions: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if created, err := kadm.NewClient(directClient(t, s)).CreateTopics(ctx, 1, 1, nil, topics...); err != nil || created.Error() != nil {
		t.Fatal(err, created.Error())
	}
	return s
}

// regexCredential mints a client credential named name for groups and
// topics, valid for an hour.
func regexCredential(t *testing.T, s *Stack, name string, groups, topics []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cred, err := s.Stack.ClientCredential(ctx, name, groups, topics, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// rawAs dials the stack's first Kafka listener and authenticates with
// cred (OAUTHBEARER).
func rawAs(t *testing.T, s *Stack, cred string) *rawConn {
	t.Helper()
	r := dialRaw(t, s.KafkaAddrs()[0])
	r.authenticate("OAUTHBEARER", cred)
	return r
}
