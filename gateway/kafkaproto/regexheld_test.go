package kafkaproto

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRegexMatchesHeldAreBounded (listener14): the listener keeps each
// KIP-848 regex text's last match — every topic it matched before the
// connection's own filter — for 1,024 texts. Credentials for a-* joining
// with ever new regexes that match every topic of a fleet of b-…
// topics (.*|x0, .*|x1, …), each answered UNKNOWN_TOPIC_OR_PARTITION
// before the coordinator is asked, filled the cache with the whole topic
// list again and again: 128 of them here held 1,280,000 names (16 bytes
// each; ~164 MB at 1,024 on 10,000 topics). Now the names kept are
// bounded too (regexCacheNamesMax); past it the cache is emptied, as past
// its texts. Fails without (1,280,000 names held).
func TestRegexMatchesHeldAreBounded(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConnections = 256
	// Credentials for a-*: the listener matches the regexes of a
	// credential not for every topic itself.
	s, err := New(cfg, clientGate{}, tenantClients{topics: []string{"a-*"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	topics := map[string]topicInfo{}
	for i := range 10_000 {
		topics[fmt.Sprintf("b-%05d", i)] = topicInfo{partitions: 1}
	}
	s.topics.topics, s.topics.byID, s.topics.loaded, s.topics.maxAge = topics, map[[16]byte]string{}, time.Now().Add(time.Hour), time.Hour // read "now" for the whole test: no broker here
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(t, s, 10*time.Second) })
	for i := range 128 {
		r := dialAuthenticated(t, s, fmt.Sprintf("tenant-%d", i)) // each its own tenant: no debt waits
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.SetVersion(1) // SubscribedTopicRegex
		req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = "g", "", 0, 5000
		req.SubscribedTopicRegex = kmsg.StringPtr(fmt.Sprintf(".*|x%d", i))
		resp, err := r.roundTrip(req)
		if err != nil {
			t.Fatalf("regex %d: %v", i, err)
		}
		if code := resp.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("regex %d matching only topics the credential may not see: error %d, want UNKNOWN_TOPIC_OR_PARTITION", i, code)
		}
		r.nc.Close()
	}
	s.regexes.mu.Lock()
	defer s.regexes.mu.Unlock()
	held := 0
	for _, m := range s.regexes.cache {
		held += len(m.names)
	}
	if held > regexCacheNamesMax || held != s.regexes.names {
		t.Fatalf("128 regexes matching 10,000 topics each: %d names held in %d matches (counted %d), want at most %d",
			held, len(s.regexes.cache), s.regexes.names, regexCacheNamesMax)
	}
	if len(s.regexes.cache) == 0 {
		t.Fatal("no match kept")
	}
}
