package kafkaclients

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/identity/idptest"
)

// TestKgoReauthenticatesAcrossCredentialExpiry: a KIP-848 kgo consumer
// whose IdP tokens live 5 s reads through the Kafka listener for more
// than three token lifetimes. A member never outlives the credential it
// joined with, so the gateway's capgate member for it would end with the
// first token; the listener tells kgo the SASL session lifetime (KIP-368),
// kgo re-authenticates with a fresh token, and the listener carries the
// member over to it (a rejoin by member id with the new token). Before,
// the member token expired with the first token: its heartbeats were
// refused (401 token_expired), the member was lost, and kgo had to join
// again as a new member — or, before the member token was capped, the
// member lived on for 24 h on a dead token. Now the one capgate member
// stays (same id, never more than one), the client never sees its
// partitions go (each carry-over's fence and regrant is the gateway's
// business), and every record is read exactly once.
func TestKgoReauthenticatesAcrossCredentialExpiry(t *testing.T) {
	const lifetime = 5 * time.Second
	idp := idptest.New(t, "ES256")
	s := Start(t, Options{Partitions: 2, OIDC: idpConfig(idp)})
	var minted atomic.Int32
	mech := oauth.Oauth(func(context.Context) (oauth.Auth, error) {
		minted.Add(1)
		exp := time.Now().Add(lifetime).Unix()
		return oauth.Auth{Token: idp.Token(idpClaims("svc-billing", idptest.Claims{"exp": exp}))}, nil
	})
	produced := produceEvery(t, s, 2, 100*time.Millisecond)
	m := startMember(t, s.Topic, "reauth-c1", "billing-reauth", kip848, func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.KafkaAddrs()...), kgo.SASL(mech), kgo.RetryTimeout(10 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	})
	var first string
	sdk.Eventually(t, 20*time.Second, "the member reads", func() (bool, string) {
		ids := memberIDs(t, s, "billing-reauth")
		if len(ids) == 1 {
			first = ids[0]
		}
		return first != "" && len(m.Records()) > 0, fmt.Sprintf("members %v, %d records", ids, len(m.Records()))
	})
	start := time.Now()
	sdk.Eventually(t, 40*time.Second, "three token lifetimes of reading", func() (bool, string) {
		if ids := memberIDs(t, s, "billing-reauth"); len(ids) != 1 || ids[0] != first {
			t.Fatalf("after %v the group holds members %v, want the one member %s (tokens %d)", time.Since(start).Round(time.Millisecond), ids, first, minted.Load())
		}
		return time.Since(start) > 3*lifetime+time.Second, fmt.Sprintf("%d tokens", minted.Load())
	})
	end := produced.stop()
	sdk.Eventually(t, 20*time.Second, "every record read", func() (bool, string) {
		l := ledgerOf(m)
		return l.count() == end, fmt.Sprintf("%d of %d; errors %v", l.count(), end, m.Errors())
	})
	for p, offsets := range ledgerOf(m) {
		for o, by := range offsets {
			if len(by) > 1 {
				t.Errorf("partition %d offset %d read %d times", p, o, len(by))
			}
		}
	}
	if ids := memberIDs(t, s, "billing-reauth"); len(ids) != 1 || ids[0] != first {
		t.Fatalf("the group holds members %v at the end, want the one member %s", ids, first)
	}
	if r := m.Revoked(); len(r) > 0 {
		t.Errorf("the client was told to give up partitions %v: a carry-over's fence reached it", r)
	}
	m.mu.Lock()
	lost := m.lost
	m.mu.Unlock()
	if len(lost) > 0 {
		t.Errorf("the client lost partitions %v", lost)
	}
	t.Logf("%d tokens over %v, %d records read once each", minted.Load(), time.Since(start).Round(time.Millisecond), end)
}

// TestKgoRenewsACapgateCredentialsMember: the same with capgate client
// credentials of 5 s from the admin API, renewed by a new one (of the
// same name) when less than half its lifetime is left, as a token source
// does: kgo's connections share one credential, and each re-authenticates
// with the renewed one in turn. A member is bound to its credential's
// jti; the carry-over's rejoin presents the old credential beside the new
// one (renew_credential: the connection re-authenticated from it, so the
// client holds both), and the coordinator renews the member in place,
// rebound to the new credential — one capgate member across every
// credential. Before renew_credential the rejoin was refused and the
// listener renewed the member anew as the SDK does (released everything,
// left, joined with the new credential: a new member per credential);
// before that, the member ended with the first credential and kgo's next
// heartbeat met UNKNOWN_MEMBER_ID while the dead member held the
// partitions until its session timed out. Now the group never holds two
// members, one member lives across the credentials, and no record is
// lost.
//
// The credentials are no longer one per token callback (one per
// connection): two credentials an admin minted are two holders even when
// named alike, and a connection reaches only the members of its own
// credential (redteam7 #1, TestSameNamedCredentialsShareNothing).
func TestKgoRenewsACapgateCredentialsMember(t *testing.T) {
	const lifetime = 5 * time.Second
	s := Start(t, Options{Partitions: 2})
	var minted atomic.Int32
	var mu sync.Mutex
	var cred string
	var expires time.Time
	mech := oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		mu.Lock()
		defer mu.Unlock()
		if time.Until(expires) < lifetime/2 {
			c, err := s.Stack.ClientCredential(ctx, "short", []string{"renew-*"}, []string{s.Topic}, lifetime)
			if err != nil {
				return oauth.Auth{}, err
			}
			minted.Add(1)
			cred, expires = c, time.Now().Add(lifetime)
		}
		return oauth.Auth{Token: cred}, nil
	})
	produced := produceEvery(t, s, 2, 100*time.Millisecond)
	m := startMember(t, s.Topic, "renew-c1", "renew-g", kip848, func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.KafkaAddrs()...), kgo.SASL(mech), kgo.RetryTimeout(10 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	})
	seen := map[string]bool{}
	sdk.Eventually(t, 20*time.Second, "the member reads", func() (bool, string) {
		return len(m.Records()) > 0, fmt.Sprintf("%d records", len(m.Records()))
	})
	start := time.Now()
	sdk.Eventually(t, 40*time.Second, "three credential lifetimes of reading", func() (bool, string) {
		ids := memberIDs(t, s, "renew-g")
		if len(ids) > 1 {
			t.Fatalf("after %v the group holds members %v at once", time.Since(start).Round(time.Millisecond), ids)
		}
		for _, id := range ids {
			seen[id] = true
		}
		return time.Since(start) > 3*lifetime+time.Second, fmt.Sprintf("%d credentials, members %v", minted.Load(), ids)
	})
	end := produced.stop()
	sdk.Eventually(t, 30*time.Second, "every record read", func() (bool, string) {
		l := ledgerOf(m)
		return l.count() == end, fmt.Sprintf("%d of %d; errors %v", l.count(), end, m.Errors())
	})
	if len(seen) != 1 || minted.Load() < 3 {
		t.Errorf("members seen %v across %d credentials: want one, renewed in place", seen, minted.Load())
	}
	t.Logf("%d credentials over %v, %d members in turn, %d records read", minted.Load(), time.Since(start).Round(time.Millisecond), len(seen), end)
}

// memberIDs lists the group's capgate members (none before it exists).
func memberIDs(t testing.TB, s *Stack, group string) []string {
	var d coordinator.GroupDescription
	if status, _ := s.Admin(t, "GET", "/v1/admin/groups/"+group, nil, &d); status != 200 {
		return nil
	}
	var ids []string
	for _, m := range d.Members {
		ids = append(ids, m.ID)
	}
	return ids
}

// tickProducer writes one record to each of partitions every interval,
// straight to Kafka, until stop, which returns how many it wrote.
type tickProducer struct {
	cancel context.CancelFunc
	done   chan int
}

func produceEvery(t testing.TB, s *Stack, partitions int32, interval time.Duration) *tickProducer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Kafka.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithCancel(context.Background())
	p := &tickProducer{cancel: cancel, done: make(chan int, 1)}
	go func() {
		n := 0
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for ctx.Err() == nil {
			for part := range partitions {
				r := &kgo.Record{Topic: s.Topic, Partition: part, Value: []byte(fmt.Sprintf("v%d", n))}
				if cl.ProduceSync(context.Background(), r).FirstErr() == nil {
					n++
				}
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
			}
		}
		p.done <- n
	}()
	return p
}

func (p *tickProducer) stop() int {
	p.cancel()
	return <-p.done
}
