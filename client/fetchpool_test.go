package client

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/capgate/capgate/tlsconf"
)

// queue starts n acquires of u that wait for slots of s, in order (each
// queued before the next starts); each sends u's name on got once
// granted, and its error on errs if it fails.
func queue(t *testing.T, ctx context.Context, s *fairSlots, u *slotUser, name string, n int, got chan<- string, errs chan<- error) {
	t.Helper()
	for i := range n {
		before := waiting(s, u)
		go func() {
			if err := s.acquire(ctx, u); err != nil {
				errs <- err
				return
			}
			got <- fmt.Sprintf("%s %d", name, i)
		}()
		waitFor(t, name+"'s fetch queued", func() bool { return waiting(s, u) == before+1 })
	}
}

func waiting(s *fairSlots, u *slotUser) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return u.waiting.Len()
}

// TestFetchSlotsTakeTurnsBetweenConsumers: a consumer of many partitions
// with a long queue of fetches waiting for a gateway's slots does not
// hold back another consumer's single fetch queued after them: the next
// slot freed goes to the consumer holding fewest; each consumer's own
// fetches go in order. First come first served across consumers made the
// single partition wait for every fetch queued before it (with 2,000
// partitions idle, partitions/slots long polls: seconds per fetch); a
// turn that served a consumer until its queue emptied, for ever.
func TestFetchSlotsTakeTurnsBetweenConsumers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newFairSlots(3)
	wide, narrow, third := newSlotUser(1000), newSlotUser(1000), newSlotUser(1000)
	for range 3 {
		if err := s.acquire(ctx, wide); err != nil {
			t.Fatal(err)
		}
	}
	got, errs := make(chan string, 100), make(chan error, 100)
	queue(t, ctx, s, wide, "wide", 50, got, errs)
	queue(t, ctx, s, narrow, "narrow", 2, got, errs)
	queue(t, ctx, s, third, "third", 2, got, errs)

	var order []string
	for _, u := range []*slotUser{wide, wide, wide, narrow, third, wide} {
		s.release(u)
		order = append(order, <-got)
	}
	// The fewest held first, the first in turn among equals.
	want := []string{"narrow 0", "third 0", "wide 0", "narrow 1", "third 1", "wide 1"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("slots went to %v, want %v", order, want)
		}
	}
	if n := waiting(s, wide); n != 48 {
		t.Fatalf("%d of wide's fetches waiting, want 48", n)
	}
}

// TestFetchSlotsKeepEachConsumersBound: a consumer never holds more than
// its own bound of a pool's slots, whatever is free; the others take
// what it leaves.
func TestFetchSlotsKeepEachConsumersBound(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newFairSlots(10)
	small, other := newSlotUser(2), newSlotUser(10)
	for range 2 {
		if err := s.acquire(ctx, small); err != nil {
			t.Fatal(err)
		}
	}
	got, errs := make(chan string, 10), make(chan error, 10)
	queue(t, ctx, s, small, "small", 1, got, errs)
	for range 8 { // the rest of the pool: not held back by small's waiting fetch
		if err := s.acquire(ctx, other); err != nil {
			t.Fatal(err)
		}
	}
	s.release(other)
	// A free slot, small's fetch waiting first: small is at its bound,
	// other takes it.
	bounded, cancelBounded := context.WithTimeout(ctx, waitLimit)
	defer cancelBounded()
	if err := s.acquire(bounded, other); err != nil {
		t.Fatalf("other waited for a free slot behind small's fetch: %v", err)
	}
	select {
	case g := <-got:
		t.Fatalf("%s took a slot past its bound", g)
	default:
	}
	s.release(small)
	if g := <-got; g != "small 0" {
		t.Fatalf("%s took small's slot", g)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if small.held != 2 || other.held != 8 || s.held != 10 {
		t.Fatalf("held: small %d other %d total %d, want 2, 8, 10", small.held, other.held, s.held)
	}
}

// TestFetchSlotsGivenUpLeaveNoTrace: a fetch whose context ends while it
// waits returns the context's error, holds nothing, and the next fetch
// takes the slot; an ended context never gets a slot, free or not (a
// stopped partition's fetch begins nothing).
func TestFetchSlotsGivenUpLeaveNoTrace(t *testing.T) {
	ctx := context.Background()
	s := newFairSlots(1)
	a, b := newSlotUser(10), newSlotUser(10)
	if err := s.acquire(ctx, a); err != nil {
		t.Fatal(err)
	}
	gone, cancelGone := context.WithCancel(ctx)
	got, errs := make(chan string, 10), make(chan error, 10)
	queue(t, gone, s, b, "gone", 1, got, errs)
	queue(t, ctx, s, a, "a", 1, got, errs)
	cancelGone()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("given up: %v", err)
	}
	s.release(a)
	if g := <-got; g != "a 0" {
		t.Fatalf("%s took the slot", g)
	}
	s.release(a)
	ended, cancelEnded := context.WithCancel(ctx)
	cancelEnded()
	if err := s.acquire(ended, b); !errors.Is(err, context.Canceled) {
		t.Fatalf("an ended context took a free slot: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held != 0 || a.held != 0 || b.held != 0 || len(s.turn) != 0 {
		t.Fatalf("held %d (a %d, b %d), %d in turn after everything returned", s.held, a.held, b.held, len(s.turn))
	}
}

// TestFetchPoolSharesOneClientPerAddressAndTLS: consumers of one pool
// fetching from the same gateway address with the same TLS settings get
// one HTTP client (its connections shared, at most the pool's bound);
// another address or other TLS settings (another client certificate)
// get another; the last user's letGo drops it.
func TestFetchPoolSharesOneClientPerAddressAndTLS(t *testing.T) {
	p := NewFetchPool(8)
	a := p.client("http://gw:8080", tlsconf.ClientConfig{}, nil)
	b := p.client("HTTP://GW:8080/prefix", tlsconf.ClientConfig{}, nil)
	if a != b {
		t.Fatal("two clients for one gateway address")
	}
	if p.client("http://gw:8081", tlsconf.ClientConfig{}, nil) == a {
		t.Fatal("one client for two addresses")
	}
	mtls := tlsconf.ClientConfig{CertFile: "c.pem", KeyFile: "k.pem"}
	if p.client("http://gw:8080", mtls, nil) == a {
		t.Fatal("a client certificate's connections shared with consumers without it")
	}
	if p.slotsOf("http://gw:8080") != p.slotsOf("http://gw:8080/other") {
		t.Fatal("two slot sets for one address")
	}
	p.letGo("http://gw:8080", tlsconf.ClientConfig{})
	if p.client("http://gw:8080", tlsconf.ClientConfig{}, nil) != a {
		t.Fatal("dropped while a consumer still used it")
	}
	p.letGo("http://gw:8080", tlsconf.ClientConfig{})
	p.letGo("http://gw:8080", tlsconf.ClientConfig{})
	if p.client("http://gw:8080", tlsconf.ClientConfig{}, nil) == a {
		t.Fatal("kept after its last user let go")
	}
}
