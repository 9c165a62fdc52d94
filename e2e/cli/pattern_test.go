package cli_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// listenerAddr is the Kafka listener's address capgate dev printed.
var listenerAddr = regexp.MustCompile(`(?m)^\s+kafka listener:\s+(\S+)`)

// TestPatternMatchingNothingIsSaid: a group member whose topic pattern
// matches no topic holds nothing, which is no error (a topic created
// later that matches is assigned) but was said only by the SDK. A KIP-848
// join through the listener whose SubscribedTopicRegex matches nothing
// (the Java consumer's subscribe(SubscriptionPattern) sends it as typed;
// kgo matches client-side and does not join until its regex matches)
// got an empty assignment and the gateway said nothing (newuser5 #18);
// `capgate admin group` showed the group Stable with 0 partitions, no
// word on why (#19). The gateway now logs it and the describe counts
// each pattern member's matches and says so.
func TestPatternMatchingNothingIsSaid(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	m := listenerAddr.FindStringSubmatch(d.stdout.String())
	if m == nil {
		t.Fatalf("capgate dev printed no kafka listener:\n%s", d.stdout.String())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(m[1]),
		kgo.SASL(plain.Auth{User: "capgate", Pass: d.credentials(t).ClientCredential}.AsMechanism()), kgo.ClientID("regex-nothing"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "regex-nothing", "java-like", 0, 5000
	hb.SubscribedTopicRegex, hb.Topics = kmsg.StringPtr("^de"), []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := hb.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || resp.MemberEpoch != 1 || resp.Assignment == nil || len(resp.Assignment.Topics) != 0 {
		t.Fatalf("a join with a regex matching nothing: %+v, %v; want epoch 1 and an empty assignment", resp, err)
	}

	// The describe says it: topic_pattern_matches 0, and the table a line.
	var g struct {
		Members []struct {
			TopicPattern        string `json:"topic_pattern"`
			TopicPatternMatches *int   `json:"topic_pattern_matches"`
		} `json:"members"`
	}
	d.adminJSON(t, &g, "group", "regex-nothing")
	if len(g.Members) != 1 || g.Members[0].TopicPattern == "" || g.Members[0].TopicPatternMatches == nil || *g.Members[0].TopicPatternMatches != 0 {
		t.Fatalf("admin group regex-nothing: %+v, want one pattern member matching 0 topics", g)
	}
	table := d.adminCLI(t, "group", "regex-nothing", "-o", "table")
	mustMatch(t, "admin group -o table", table, `(?m)^pattern \^de of regex-nothing-[0-9a-f]+: topic pattern matches no topic: this member holds no partition until .*: for topics starting "de" use "de\.\*"$`)

	// The gateway's log (capgate dev's stderr) says it at the join.
	eventually(t, 60*time.Second, "the gateway's warning", func() (bool, string) {
		return strings.Contains(d.stderr.String(), `kafka member's topic pattern matches no topic: this member holds no partition until a topic whose whole name matches is created; the pattern must match the whole name (anchored, as Java's subscribe(Pattern)): for topics starting "de" use "de.*"`), "not logged"
	})

	// A pattern that matches says nothing of it.
	regexConsumer(t, m[1], d.credentials(t).ClientCredential, "regex-demo", "^dem")
	eventually(t, 60*time.Second, "regex-demo's partitions", func() (bool, string) {
		var g groupView
		if d.admin(t, "GET", "/v1/admin/groups/regex-demo", &g) != 200 {
			return false, "no group yet"
		}
		return len(g.Partitions) == 12, "not every partition granted"
	})
	if table := d.adminCLI(t, "group", "regex-demo", "-o", "table"); strings.Contains(table, "matches no topic") {
		t.Fatalf("a pattern matching demo said it matches nothing:\n%s", table)
	}
	for _, line := range strings.Split(d.stderr.String(), "\n") {
		if strings.Contains(line, "matches no topic") && !strings.Contains(line, `"regex-nothing"`) {
			t.Fatalf("the gateway warned of a member other than regex-nothing's: %s", line)
		}
	}
}

// regexConsumer polls a kgo KIP-848 consumer of group (its client id
// too) subscribed to regex (kgo sends it as SubscribedTopicRegex, a part
// matching) through the listener at addr until the test ends.
func regexConsumer(t *testing.T, addr, credential, group, regex string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.SASL(plain.Auth{User: "capgate", Pass: credential}.AsMechanism()),
		kgo.ClientID(group), kgo.ConsumerGroup(group),
		kgo.ConsumeRegex(), kgo.ConsumeTopics(regex), kgo.ServerSideBalancer())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() { cancel(); <-polled; cl.Close() })
}
