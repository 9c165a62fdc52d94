package client

import (
	"context"
	"errors"
	"testing"

	"github.com/capgate/capgate/api"
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
