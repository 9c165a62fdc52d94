package outage

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/internal/stack"
)

// TestClientsFollowTheLeader: three coordinator replicas (the Kafka-log
// state on a 3-broker kfake) and two gateways syncing with the URL list.
// The consumers list a standby FIRST: every call they send there is
// answered 421 not_leader and followed to the leader within the call.
// They join and consume; a gateway that shuts down leaves through the
// list, so a revoke right after completes in round trips; when the
// leader is killed, the clients move to the new one and nothing is lost.
func TestClientsFollowTheLeader(t *testing.T) {
	tm := leaveTiming()
	w := startWorld(t, stack.Options{Coordinators: 3, Brokers: 3, Gateways: 2, Timing: tm})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader, err := w.s.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var standbys []string
	for _, co := range w.s.Coordinators() {
		if co != leader {
			standbys = append(standbys, co.URL)
		}
	}
	w.edit = func(c *client.Config) {
		c.CoordinatorURL, c.CoordinatorURLs = standbys[0], []string{standbys[1], leader.URL}
	}
	var toStandby atomic.Int64 // requests that reached the standby listed first
	w.http = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if "http://"+r.URL.Host == standbys[0] {
			toStandby.Add(1)
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	w.add("m1")
	w.add("m2")
	if _, ok := w.settled(500*time.Millisecond, time.Minute); !ok {
		t.Fatal("group never settled behind a standby listed first")
	}
	// Each consumer's join reaches it once and is followed; then the
	// leader is cached (without the cache every heartbeat would go there
	// first). A transient failure at the leader may send one more.
	if n := toStandby.Load(); n < 2 || n > 4 {
		t.Fatalf("%d requests reached the standby listed first, want 2 (each consumer's join; then the cached leader)", n)
	}

	if err := w.s.Gateways()[1].Stop(); err != nil {
		t.Fatal(err)
	}
	took, err := w.revoke(0)
	if err != nil || took >= tm.GatewayTimeout/4 {
		t.Fatalf("revoke right after a gateway left (through the replicas): %s, %v; gateway_timeout %s", took, err, tm.GatewayTimeout)
	}

	leader.Kill()
	next, err := w.s.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatal("the killed replica still leads")
	}
	if _, ok := w.settled(500*time.Millisecond, time.Minute); !ok {
		t.Fatal("group never settled after the takeover")
	}
	w.prod.Stop()
	if !w.drained(time.Minute) {
		t.Fatal("not every acknowledged record was delivered")
	}
	if r := w.analyze("after", time.Time{}, time.Now(), time.Now()); r.Lost != 0 {
		t.Fatalf("lost %d of %d records", r.Lost, r.Produced)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
