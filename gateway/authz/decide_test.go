package authz

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

func TestDecideEveryReason(t *testing.T) {
	v := newView()
	mustApply(t, v, api.SyncResponse{
		Seq:            1,
		Fences:         []api.Fence{{Group: "billing", Topic: "orders", Partition: 3, Epoch: 6}},
		Denied:         []api.Denied{{JTI: jti(7), Exp: t0.Unix() + 60}, {JTI: jti(8), Exp: t0.Unix() + 60}},
		RevokedMembers: []api.RevokedMember{{Group: "billing", MemberID: "zombie", Until: t0.Unix() + 60}},
	}, t0)
	edit := func(f func(c *ocap.Claims)) *ocap.Claims { c := capability(); c.Epoch = 6; f(c); return c }
	same := func(*ocap.Claims) {}
	cases := []struct {
		name   string
		c      *ocap.Claims
		req    Request
		now    int64 // seconds after t0
		want   Reason
		code   api.Code
		status int
	}{
		{"allow fetch", edit(same), fetchReq(10), 0, Allow, "", 200},
		{"allow produce", edit(same), Request{Topic: "orders", Partition: 3, Op: ocap.OpProduce, Offset: -1}, 0, Allow, "", 200},
		{"allow above the fence", edit(func(c *ocap.Claims) { c.Epoch = 9 }), fetchReq(0), 0, Allow, "", 200},
		{"allow unfenced shared grant", edit(func(c *ocap.Claims) { c.Epoch, c.Group = 0, "" }), fetchReq(0), 0, Allow, "", 200},
		{"allow inside leeway", edit(same), fetchReq(0), 61, Allow, "", 200},
		{"expired at exp+leeway", edit(same), fetchReq(0), 62, Expired, api.CodeTokenExpired, http.StatusUnauthorized},
		{"fenced epoch", capability(), fetchReq(0), 0, Fenced, api.CodeCapabilityRevoked, http.StatusConflict},
		{"denied jti", edit(func(c *ocap.Claims) { c.ID = jti(7) }), fetchReq(0), 0, Denied, api.CodeCapabilityRevoked, http.StatusConflict},
		{"denied ancestor", edit(func(c *ocap.Claims) { c.Chain = []string{jti(2), jti(8)} }), fetchReq(0), 0, Denied, api.CodeCapabilityRevoked, http.StatusConflict},
		{"revoked member", edit(func(c *ocap.Claims) { c.Subject = "zombie" }), fetchReq(0), 0, RevokedMember, api.CodeCapabilityRevoked, http.StatusConflict},
		{"member of another group", edit(func(c *ocap.Claims) { c.Subject, c.Group = "zombie", "other" }), fetchReq(0), 0, Allow, "", 200},
		{"wrong topic", edit(same), Request{Topic: "payments", Partition: 3, Op: ocap.OpFetch}, 0, WrongTopic, api.CodeForbidden, http.StatusForbidden},
		{"wrong partition", edit(same), Request{Topic: "orders", Partition: 4, Op: ocap.OpFetch}, 0, WrongPartition, api.CodeForbidden, http.StatusForbidden},
		{"wrong op", edit(func(c *ocap.Claims) { c.Ops = ocap.Ops(ocap.OpProduce) }), fetchReq(0), 0, WrongOp, api.CodeForbidden, http.StatusForbidden},
		{"offset below range", edit(func(c *ocap.Claims) { c.Offsets = &ocap.OffsetRange{From: 10, To: 20} }), fetchReq(9), 0, OffsetOutsideRange, api.CodeForbidden, http.StatusForbidden},
		{"offset at range end", edit(func(c *ocap.Claims) { c.Offsets = &ocap.OffsetRange{From: 10, To: 20} }), fetchReq(20), 0, OffsetOutsideRange, api.CodeForbidden, http.StatusForbidden},
		{"offset in range", edit(func(c *ocap.Claims) { c.Offsets = &ocap.OffsetRange{From: 10, To: 20} }), fetchReq(19), 0, Allow, "", 200},
		{"produce ignores range", edit(func(c *ocap.Claims) { c.Offsets = &ocap.OffsetRange{From: 10, To: 20} }), Request{Topic: "orders", Partition: 3, Op: ocap.OpProduce, Offset: -1}, 0, Allow, "", 200},
		{"expired wins over fence", capability(), fetchReq(0), 62, Expired, api.CodeTokenExpired, http.StatusUnauthorized},
		{"revocation wins over coverage", capability(), Request{Topic: "payments", Partition: 0, Op: ocap.OpFetch}, 0, Fenced, api.CodeCapabilityRevoked, http.StatusConflict},
	}
	seen := map[Reason]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.c, tc.req, v, t0.Add(time.Duration(tc.now)*time.Second))
			if got != tc.want || got.Code() != tc.code || got.Status() != tc.status {
				t.Fatalf("Decide = %v (%s, %d), want %v (%s, %d)", got, got.Code(), got.Status(), tc.want, tc.code, tc.status)
			}
			if got != Allow && (got.Message() == "" || api.Lookup(got.Code()).Status != got.Status()) {
				t.Fatalf("reason %v: message %q, table status %d", got, got.Message(), api.Lookup(got.Code()).Status)
			}
		})
		seen[tc.want] = true
	}
	for _, r := range Reasons() {
		if !seen[r] {
			t.Errorf("reason %v has no case", r)
		}
	}
}

func TestReasonOutsideTheSetPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	_ = reasonCount.String()
}

func TestDecideAllocatesNothing(t *testing.T) {
	v := benchView(1000)
	c := capability()
	c.Chain = []string{jti(900_001), jti(900_002)}
	allocs := testing.AllocsPerRun(100, func() {
		if Decide(c, fetchReq(1), v, t0) != Allow {
			t.Fatal("refused")
		}
		_ = v.QoS(c, t0)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Decide", allocs)
	}
}

// TestDecideConcurrentWithApply runs Decide, Raise and QoS against Apply
// and Prune; run with -race.
func TestDecideConcurrentWithApply(t *testing.T) {
	v := newView()
	c := capability()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = Decide(c, fetchReq(1), v, t0)
				_ = v.QoS(c, t0)
				v.Raise("billing", "orders", 3, 5)
			}
		})
	}
	for i := range 200 {
		mustApply(t, v, api.SyncResponse{
			Seq:    uint64(i + 1),
			Reset:  i%50 == 0,
			Fences: []api.Fence{{Group: "billing", Topic: "orders", Partition: int32(i % 4), Epoch: uint64(i)}},
			Denied: []api.Denied{{JTI: jti(100 + i), Exp: t0.Unix() + 1}},
			QoS:    []api.QoSOverride{{ID: "q", Selector: api.QoSSelector{Topic: "orders"}, Monitor: "m", Until: t0.Unix() + 5}},
		}, t0)
		v.Prune(t0.Add(2e9))
	}
	close(stop)
	wg.Wait()
	if got := v.Fence("billing", "orders", 3); got < 199 {
		t.Fatalf("fence %d, want ≥ 199", got)
	}
}
