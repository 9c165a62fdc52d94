package kafkaproto

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerGroupDescribeBounded: ConsumerGroupDescribe is bounded as
// DescribeGroups and OffsetFetch are (redteam3 item 2's shape): a request
// naming one group 100 times and 150 others answers the first 100 from
// one coordinator read and the other 150 INVALID_REQUEST without a read,
// the first of them with a message (TestConsumerGroupDescribeAnswerIsSmall
// says why only the first); one refusal line is logged. The real stack's test
// is e2e/kafkaclients TestConsumerGroupDescribe.
func TestConsumerGroupDescribeBounded(t *testing.T) {
	a := &adminCoordinator{}
	logs, b := adminListener(t, a.start(t), 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	for i := range 250 {
		name := "same"
		if i >= 100 {
			name = fmt.Sprintf("g-%d", i)
		}
		req.Groups = append(req.Groups, name)
	}
	raw, err := b.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	groups := raw.(*kmsg.ConsumerGroupDescribeResponse).Groups
	if len(groups) != 250 {
		t.Fatalf("%d groups answered, want 250", len(groups))
	}
	for i, g := range groups {
		switch {
		case i < 100 && (g.Group != "same" || g.ErrorCode != 0 || g.State != "Stable" || g.AssignorName != "sticky"):
			t.Fatalf("entry %d: %+v, want same described Stable", i, g)
		case i == 100 && (g.ErrorCode != kerr.InvalidRequest.Code || g.ErrorMessage == nil):
			t.Fatalf("entry %d (%s, the first beyond 100): error %d, want INVALID_REQUEST with a message", i, g.Group, g.ErrorCode)
		case i > 100 && (g.ErrorCode != kerr.InvalidRequest.Code || g.ErrorMessage != nil):
			t.Fatalf("entry %d (%s, beyond 100): error %d, message %v; want INVALID_REQUEST, the message on the first only", i, g.Group, g.ErrorCode, g.ErrorMessage)
		}
	}
	a.mu.Lock()
	reads, groupsRead := a.described["same"], len(a.described)
	a.mu.Unlock()
	if reads != 1 || groupsRead != 1 {
		t.Errorf("%d reads of same, %d groups read; want same read once and nothing else", reads, groupsRead)
	}
	if n := logs.FilterMessage("kafka ConsumerGroupDescribe refused").Len(); n != 1 {
		t.Errorf("%d refusal lines, want 1", n)
	}
}

// TestConsumerGroupDescribeEndsWhenTheClientLeaves: a ConsumerGroupDescribe
// of 50 groups whose coordinator does not answer is cancelled as soon as
// its client hangs up, and no further group is read.
func TestConsumerGroupDescribeEndsWhenTheClientLeaves(t *testing.T) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	for i := range 50 {
		req.Groups = append(req.Groups, fmt.Sprintf("g-%d", i))
	}
	a := hangUpDuring(t, req)
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.described) != 1 {
		t.Errorf("%d groups read, want only the one in flight when the client left", len(a.described))
	}
}

// TestConsumerGroupDescribeAnswerIsSmall is redteam19 #2: every group
// past the first 100 was answered INVALID_REQUEST with its own ~40-byte
// message, so a ConsumerGroupDescribe of 10,000 empty names (10 KB,
// within kafka_max_request_partitions) was answered 636 KB — 256
// connections of one credential reading nothing, ~160 MB, past
// max_answer_bytes_held_per_holder (64 MiB): such an answer is counted,
// never refused. Now the message rides on the first refused group only
// and the answer is ~20 bytes a group. Fails without (636 KB).
func TestConsumerGroupDescribeAnswerIsSmall(t *testing.T) {
	a := &adminCoordinator{}
	cfg := testConfig()
	cfg.CoordinatorURL = a.start(t)
	s := startGroupListener(t, cfg)
	c := dialAuthenticated(t, s, "credential")
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	for range 10000 {
		req.Groups = append(req.Groups, "")
	}
	if err := c.send(req); err != nil {
		t.Fatal(err)
	}
	c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	answer, err := readResponse(c.nc)
	if err != nil {
		t.Fatal(err)
	}
	if n, request := len(answer), len(req.AppendTo(nil)); n > 24*len(req.Groups) {
		t.Errorf("a ConsumerGroupDescribe of %d bytes naming %d groups answered %d bytes, want at most 24 a group", request, len(req.Groups), n)
	}
}
