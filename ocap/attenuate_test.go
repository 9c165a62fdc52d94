package ocap

import (
	"errors"
	"testing"
	"time"
)

func parentCap(t *testing.T, f *fixture) *Claims {
	t.Helper()
	tok, _, err := f.minter.Mint(KindCapability, Claims{
		Subject: "m-1", Group: "g", Topic: "orders", Partition: part(2), Epoch: 4,
		Ops: Ops(OpFetch | OpCommit), Offsets: &OffsetRange{From: 100, To: 200}, QoS: &QoS{MaxBytesPerSec: 1000},
	}, t0, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.v.Verify(tok, KindCapability, t0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAttenuateNarrows(t *testing.T) {
	f := newFixture(t)
	p := parentCap(t, f)
	now := t0.Add(time.Minute)
	child, ttl, err := Attenuate(p, Attenuation{Ops: Ops(OpFetch), Offsets: &OffsetRange{From: 120, To: 150}, TTL: time.Minute, MaxBytesPerSec: 10}, now)
	if err != nil {
		t.Fatal(err)
	}
	tok, minted, err := f.minter.Mint(KindCapability, child, now, ttl)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.v.Verify(tok, KindCapability, now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Ops != Ops(OpFetch) || *got.Offsets != (OffsetRange{120, 150}) || got.QoS.MaxBytesPerSec != 10 {
		t.Fatalf("child = %+v", got)
	}
	if got.Topic != p.Topic || *got.Partition != *got.Partition || got.Epoch != p.Epoch || got.Group != p.Group || got.Subject != p.Subject {
		t.Fatal("child changed the partition, epoch, group or holder")
	}
	if len(got.Chain) != 1 || got.Chain[0] != p.ID || got.ID == p.ID || minted.ID != got.ID {
		t.Fatalf("chain = %v", got.Chain)
	}
	if got.ExpiresAt > p.ExpiresAt {
		t.Fatal("child outlives parent")
	}
	// Grandchild extends the chain.
	gc, _, err := Attenuate(got, Attenuation{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(gc.Chain) != 2 || gc.Chain[0] != p.ID || gc.Chain[1] != got.ID {
		t.Fatalf("grandchild chain = %v", gc.Chain)
	}
}

func TestAttenuateRefusesWidening(t *testing.T) {
	f := newFixture(t)
	p := parentCap(t, f)
	now := t0.Add(time.Minute) // parent has 4 minutes left
	cases := []struct {
		name string
		a    Attenuation
		want error
	}{
		{"add produce", Attenuation{Ops: Ops(OpFetch | OpProduce)}, ErrWiden},
		{"produce only", Attenuation{Ops: Ops(OpProduce)}, ErrWiden},
		{"offsets below", Attenuation{Offsets: &OffsetRange{From: 99, To: 150}}, ErrWiden},
		{"offsets above", Attenuation{Offsets: &OffsetRange{From: 150, To: 201}}, ErrWiden},
		{"offsets unbounded", Attenuation{Offsets: &OffsetRange{From: 150, To: 0}}, ErrWiden},
		{"offsets inverted", Attenuation{Offsets: &OffsetRange{From: 150, To: 120}}, ErrBadOffsetRange},
		{"longer lease", Attenuation{TTL: 5 * time.Minute}, ErrWiden},
		{"negative lease", Attenuation{TTL: -time.Second}, ErrWiden},
		{"faster rate", Attenuation{MaxBytesPerSec: 1001}, ErrWiden},
		{"negative rate", Attenuation{MaxBytesPerSec: -1}, ErrBadQoS},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := Attenuate(p, tc.a, now); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if _, _, err := Attenuate(p, Attenuation{}, p.ExpiresAt.time()); !errors.Is(err, ErrExpired) {
		t.Fatalf("attenuating an expired parent: %v", err)
	}
}

// TestAttenuateNeverWidensRandom checks every dimension over random
// requests: whatever Attenuate accepts is within the parent.
func TestAttenuateNeverWidensRandom(t *testing.T) {
	f := newFixture(t)
	p := parentCap(t, f)
	now := t0.Add(time.Minute)
	r := newSeeded(3)
	buf := make([]byte, 8)
	accepted := 0
	for i := 0; i < 5000; i++ {
		r.Read(buf)
		a := Attenuation{Ops: Ops(buf[0] & 7), TTL: time.Duration(int(buf[1])-10) * 2 * time.Second, MaxBytesPerSec: int64(buf[2]) * 8}
		if buf[3]&1 == 1 {
			a.Offsets = &OffsetRange{From: 90 + int64(buf[4]), To: int64(buf[5]) * 2}
		}
		c, ttl, err := Attenuate(p, a, now)
		if err != nil {
			continue
		}
		accepted++
		exp := now.Add(ttl).Unix()
		switch {
		case !c.Ops.SubsetOf(p.Ops) || c.Ops == 0:
			t.Fatalf("ops widened: %v", a)
		case !c.Offsets.Within(*p.Offsets):
			t.Fatalf("offsets widened: %+v", c.Offsets)
		case exp > int64(p.ExpiresAt):
			t.Fatalf("lease widened: %v", a)
		case c.QoS == nil || c.QoS.MaxBytesPerSec > p.QoS.MaxBytesPerSec || c.QoS.MaxBytesPerSec <= 0:
			t.Fatalf("rate widened: %v", a)
		case c.Topic != p.Topic || *c.Partition != *p.Partition || c.Epoch != p.Epoch || c.Group != p.Group:
			t.Fatal("identity changed")
		}
	}
	if accepted < 100 {
		t.Fatalf("only %d of 5000 accepted: the generator is too narrow to test anything", accepted)
	}
}
