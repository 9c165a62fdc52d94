package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/coordinators/coordinatorstest"
)

func TestProducerProducesAndFailsOver(t *testing.T) {
	s := newStore()
	gw1, gw2 := newFakeGateway(t, "gw1", s), newFakeGateway(t, "gw2", s)
	s.allow("cap-produce", p0)
	gw1.setUnavailable(true)
	// One comma-separated element, as $CAPGATE_GATEWAY_URLS and
	// Config.Gateways take it (redteam8 #5: NewProducer refused it).
	p, err := NewProducer([]string{gw1.srv.URL + ", " + gw2.srv.URL}, "cap-produce")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	records := []Record{{Key: []byte("k1"), Value: []byte("v1")}, {Value: []byte("v2"), Headers: []Header{{Key: "h", Value: []byte("x")}}}}
	base, err := p.Produce(ctx, "orders", 0, records)
	if err != nil || base != 0 {
		t.Fatalf("produce: base %d err %v", base, err)
	}
	if base, err = p.Produce(ctx, "orders", 0, records[:1]); err != nil || base != 2 {
		t.Fatalf("second produce: base %d err %v", base, err)
	}
	if gw1.requestCount() != 1 {
		t.Fatalf("first gateway tried %d times, want once before failing over", gw1.requestCount())
	}
	got := s.records(p0)
	if len(got) != 3 || string(got[0].Key) != "k1" || string(got[1].Value) != "v2" || got[1].Headers[0].Key != "h" {
		t.Fatalf("stored %+v", got)
	}
}

func TestProducerClosedGatewayAndRefusal(t *testing.T) {
	s := newStore()
	gw1, gw2 := newFakeGateway(t, "gw1", s), newFakeGateway(t, "gw2", s)
	gw1.srv.Close()
	s.allow("cap-produce", p0)
	p, err := NewProducer([]string{gw1.srv.URL, gw2.srv.URL}, "cap-other")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, err = p.Produce(ctx, "orders", 0, []Record{{Value: []byte("v")}})
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != api.CodeUnauthorized || ce.Op != "produce orders/0" {
		t.Fatalf("produce with an unknown capability: %v", err)
	}
	p.SetCapability("cap-produce")
	if _, err := p.Produce(ctx, "orders", 0, []Record{{Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if got := s.records(p0); len(got) != 1 {
		t.Fatalf("stored %d records, want 1", len(got))
	}
}

func TestNewProducerValidates(t *testing.T) {
	if _, err := NewProducer(nil, "c"); err == nil {
		t.Fatal("no gateways accepted")
	}
	if _, err := NewProducer([]string{"http://127.0.0.1:1"}, ""); err == nil {
		t.Fatal("empty capability accepted")
	}
	if _, err := NewProducer([]string{"127.0.0.1:1"}, "c"); err == nil {
		t.Fatal("URL without scheme accepted")
	}
}

// TestProduceToUnreachableGatewaysEnds (redteam9 #4): a Produce whose
// context has no deadline, to gateways that refuse every connection,
// ends once its retries pass the producer's bound (request_timeout's
// default), saying nothing was written — and naming the operation once.
// Before, it retried for ever: capgate produce to a wrong --gateways
// never ended.
func TestProduceToUnreachableGatewaysEnds(t *testing.T) {
	// Refused, and the port stays this test's (a port listened on and
	// closed could be taken by a test beside it).
	p, err := NewProducer([]string{coordinatorstest.Down(t)}, "cap-produce")
	if err != nil {
		t.Fatal(err)
	}
	p.retryFor = 50 * time.Millisecond
	done := make(chan error, 1)
	go func() {
		_, err := p.Produce(context.Background(), "orders", 0, []Record{{Value: []byte("v")}})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "gave up") || !strings.Contains(err.Error(), "nothing was written") {
			t.Fatalf("produce to a refusing gateway: %v, want it to give up saying nothing was written", err)
		}
		// The operation once: it read "client: produce orders/0: gave
		// up ... (nothing was written: client: produce orders/0: ...)".
		if n := strings.Count(err.Error(), "produce orders/0"); n != 1 {
			t.Errorf("produce to a refusing gateway: %q names the operation %d times, want once", err, n)
		}
	case <-time.After(waitLimit):
		t.Fatal("produce to a gateway refusing connections still retries")
	}
}
