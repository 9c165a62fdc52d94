package kafkaclients

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestConnectionOpenedWithTheRenewedCredential: a client whose
// credential was renewed (a new admin-minted credential of the same name)
// opens a connection with the new one before its group connection
// re-authenticated (KIP-368) with it — KafkaJS opens its fetch
// connections after the join, and its token provider reads the renewed
// credential from then on. The new connection proves only the new
// credential, so the member is not its own yet; its Fetch of a partition
// the member holds is answered empty and throttled (as while a renewal
// runs), not TOPIC_AUTHORIZATION_FAILED — on which KafkaJS crashes (non
// retriable: TestKafkaJSRenewedManyTimes, 1 run in 12 under load) — and
// reads the records once the group connection re-authenticated with the
// new credential (the carry-over). A connection of another name, or of
// the same name not allowed the topic (another holder:
// TestSameNamedCredentialsShareNothing), still gets
// TOPIC_AUTHORIZATION_FAILED, and so does one of the same name once the
// member left.
func TestConnectionOpenedWithTheRenewedCredential(t *testing.T) {
	s := Start(t, Options{Partitions: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mint := func(name string) string {
		c, err := s.Stack.ClientCredential(ctx, name, []string{"rn"}, []string{s.Topic}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first, renewed, other := mint("rn-app"), mint("rn-app"), mint("rn-other")
	produceDirect(t, s, s.Topic, 0, 3)
	addr := s.KafkaAddrs()[0]
	g := dialRaw(t, addr)
	g.authenticate("OAUTHBEARER", first)
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.SetVersion(1)
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "rn", "rn-member", 0, 5000
	hb.SubscribedTopicNames, hb.Topics = []string{s.Topic}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if joined := g.roundTrip(hb).(*kmsg.ConsumerGroupHeartbeatResponse); joined.ErrorCode != 0 || joined.Assignment == nil {
		t.Fatalf("join: %+v", joined)
	}
	fetched := func(r *rawConn) (int16, int, int32) {
		resp := r.roundTrip(fetchOne(s.Topic, 0, 0, 100)).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		return p.ErrorCode, len(p.RecordBatches), resp.ThrottleMillis
	}
	f := dialRaw(t, addr)
	f.authenticate("OAUTHBEARER", renewed)
	if code, n, throttle := fetched(f); code != 0 || n != 0 || throttle == 0 {
		t.Fatalf("a fetch on a connection of the renewed credential before the carry-over: error %d (%v), %d bytes of batches, throttle %d ms; want none, empty, throttled",
			code, kerr.ErrorForCode(code), n, throttle)
	}
	o := dialRaw(t, addr)
	o.authenticate("OAUTHBEARER", other)
	if code, _, _ := fetched(o); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("a fetch with a credential of another name: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
	elsewhere, err := s.Stack.ClientCredential(ctx, "rn-app", []string{"rn"}, []string{"billing"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e := dialRaw(t, addr)
	e.authenticate("OAUTHBEARER", elsewhere) // the same name, not allowed the topic: another holder (redteam7 #1)
	if code, _, _ := fetched(e); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("a fetch with a credential of the same name not allowed the topic: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
	g.authenticate("OAUTHBEARER", renewed) // KIP-368: the group connection re-authenticates
	sdk.Eventually(t, 30*time.Second, "the renewed connection reads once the member was carried over", func() (bool, string) {
		code, n, _ := fetched(f)
		return code == 0 && n > 0, fmt.Sprintf("error %d, %d bytes", code, n)
	})
	leave := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	leave.SetVersion(1)
	leave.Group, leave.MemberID, leave.MemberEpoch = "rn", "rn-member", -1
	g.roundTrip(leave)
	third := dialRaw(t, addr)
	third.authenticate("OAUTHBEARER", mint("rn-app"))
	sdk.Eventually(t, 30*time.Second, "once the member left, a connection of its name is refused again", func() (bool, string) {
		code, _, _ := fetched(third)
		return code == kerr.TopicAuthorizationFailed.Code, fmt.Sprintf("error %d", code)
	})
}
