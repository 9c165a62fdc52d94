package gateway

import (
	"encoding/binary"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/ocap"
)

func TestRateLimiterBucket(t *testing.T) {
	l := newRateLimiter(10)
	t0 := time.Unix(1_800_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	if allow, wait := l.admit("a", 1000, at(0)); allow != 1000 || wait != 0 {
		t.Fatalf("new bucket: allow %d wait %v", allow, wait)
	}
	l.take("a", 1000, 3000, at(0)) // 2000 bytes of debt
	if _, wait := l.admit("a", 1000, at(1000)); wait < time.Second || wait > 1100*time.Millisecond {
		t.Fatalf("after 1 s of 2 s debt: wait %v, want about 1 s", wait)
	}
	if allow, wait := l.admit("a", 1000, at(2500)); wait != 0 || allow != 500 {
		t.Fatalf("debt repaid: allow %d wait %v", allow, wait)
	}
	if allow, _ := l.admit("a", 1000, at(60_000)); allow != 1000 {
		t.Fatalf("bucket overfilled: %d", allow)
	}
	if allow, _ := l.admit("a", 100, at(60_000)); allow != 100 {
		t.Fatalf("a lower live rate must cap the bucket: %d", allow)
	}
}

func TestRateLimiterBounded(t *testing.T) {
	l := newRateLimiter(8)
	now := time.Unix(1_800_000_000, 0)
	for i := range 100 {
		jti := string(rune('A' + i))
		l.admit(jti, 10, now)
		l.take(jti, 10, 1000, now) // every bucket in debt: nothing is full
		if l.len() > 8 {
			t.Fatalf("%d buckets, bound 8", l.len())
		}
	}
	later := now.Add(time.Hour) // all refilled: evicted first
	l.admit("fresh", 10, later)
	if l.len() != 1 {
		t.Fatalf("full buckets not evicted first: %d left", l.len())
	}
}

// A capability and everything attenuated from it draw from one budget
// (the root of the chain); a rate an operator override sets draws from
// one budget per override, whatever capability its selector matches.
func TestBudgetKey(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	p := int32(0)
	root := &ocap.Claims{ID: "root", Group: "g", Topic: "t", Partition: &p}
	child := &ocap.Claims{ID: "child", Chain: []string{"root"}, Group: "g", Topic: "t", Partition: &p}
	grandchild := &ocap.Claims{ID: "grandchild", Chain: []string{"root", "child"}, Group: "g", Topic: "t", Partition: &p}
	other := &ocap.Claims{ID: "other", Group: "g", Topic: "t", Partition: &p}
	v := authz.NewView(authz.Config{})
	for _, c := range []*ocap.Claims{child, grandchild} {
		if budgetKey(v, c, now) != budgetKey(v, root, now) {
			t.Fatalf("%s draws from %q, its root from %q", c.ID, budgetKey(v, c, now), budgetKey(v, root, now))
		}
	}
	if budgetKey(v, other, now) == budgetKey(v, root, now) {
		t.Fatal("unrelated capabilities share a budget")
	}
	if _, err := v.Apply(api.SyncResponse{Seq: 1, QoS: []api.QoSOverride{{ID: "throttle", Selector: api.QoSSelector{Topic: "t"},
		MaxBytesPerSec: 100, Until: now.Unix() + 60}}}, now); err != nil {
		t.Fatal(err)
	}
	if budgetKey(v, grandchild, now) != "qos/throttle" || budgetKey(v, other, now) != "qos/throttle" {
		t.Fatalf("an override's rate: keys %q and %q, want one budget", budgetKey(v, grandchild, now), budgetKey(v, other, now))
	}
}

// An answer is cut to what the budget holds (at least one record) and
// charged at once, so the next answer of the same budget finds it spent:
// answers racing for one budget cannot spend the same bytes, and the
// budget overshoots by one record at most.
func TestSpendRecordsCutsAndCharges(t *testing.T) {
	l := newRateLimiter(10)
	now := time.Unix(1_800_000_000, 0)
	recs := make([]*kgo.Record, 10)
	for i := range recs {
		recs[i] = &kgo.Record{Offset: int64(i), Value: make([]byte, 300)} // 96 + 400 encoded
	}
	keep, wait := l.spendRecords("b", 1200, recs, now)
	if wait != 0 || keep != 2 {
		t.Fatalf("first answer: keep %d wait %v, want 2 records of a 1,200-byte budget", keep, wait)
	}
	// 144 bytes left: the next answer gets the one record that crosses
	// zero (the budget's only overshoot), the one after nothing.
	if keep, wait := l.spendRecords("b", 1200, recs, now); keep != 1 || wait != 0 {
		t.Fatalf("second answer at once: keep %d wait %v, want the one crossing record", keep, wait)
	}
	if keep, wait := l.spendRecords("b", 1200, recs, now); keep != 0 || wait <= 0 {
		t.Fatalf("third answer at once: keep %d wait %v, want a refusal", keep, wait)
	}
	if keep, _ := l.spendRecords("b", 1200, recs, now.Add(10*time.Second)); keep != 2 {
		t.Fatalf("refilled: keep %d", keep)
	}
	if keep, _ := l.spendRecords("small", 10, recs, now); keep != 1 {
		t.Fatalf("a budget smaller than one record: keep %d, want the one record", keep)
	}
	if keep, _, wait := l.spendBatches("raw", 1000, recordBatch(0, 5000), now); wait != 0 || keep != 5000 {
		t.Fatalf("a raw answer of one batch to a full budget: keep %d wait %v, want the whole batch", keep, wait)
	}
	if _, _, wait := l.spendBatches("raw", 1000, recordBatch(10, 100), now); wait <= 0 {
		t.Fatal("a raw answer to a spent budget admitted")
	}
}

// recordBatch is a magic-2 record batch header claiming size bytes in
// all (the body is zeros: only headers are read when cutting).
func recordBatch(base int64, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(size-12))
	b[16] = 2
	return b
}

// A raw answer is cut after the batches that fit the budget (the first
// always goes: Kafka serves it whole), the cut answer continues at the
// first batch left out, and only what is sent is charged: one answer
// exceeds the budget by at most one batch, and only when it is the first.
func TestSpendBatchesCutsAtBudget(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	answer := slices.Concat(recordBatch(100, 1500), recordBatch(110, 1500), recordBatch(120, 1500))
	l := newRateLimiter(10)
	keep, next, wait := l.spendBatches("b", 4000, answer, now)
	if wait != 0 || keep != 3000 || next != 120 {
		t.Fatalf("4,000-byte budget, three 1,500-byte batches: keep %d next %d wait %v, want 3000 bytes up to offset 120", keep, next, wait)
	}
	keep, next, wait = l.spendBatches("b", 4000, answer, now)
	if wait != 0 || keep != 1500 || next != 110 {
		t.Fatalf("1,000 bytes left: keep %d next %d wait %v, want the first batch only, next 110", keep, next, wait)
	}
	if _, _, wait := l.spendBatches("b", 4000, answer, now); wait <= 0 {
		t.Fatal("a spent budget (500 bytes of debt) admitted an answer")
	}
	if keep, _, _ := l.spendBatches("big", 100_000, answer, now); keep != len(answer) {
		t.Fatalf("an answer within the budget was cut to %d bytes", keep)
	}
	old := recordBatch(120, 1500)
	old[16] = 1 // a message set names its last offset: not cut before it
	mixed := slices.Concat(recordBatch(100, 1500), old)
	if keep, _, _ := l.spendBatches("mixed", 2000, mixed, now); keep != len(mixed) {
		t.Fatalf("an answer was cut before an old-format message set: keep %d", keep)
	}
}

// Retry-After and retry_after_ms never reach past the capability's
// lease; Retry-After rounds down to the lease's end.
func TestRefuseRateWithinLease(t *testing.T) {
	for _, tc := range []struct {
		wait, lease time.Duration
		header      string
	}{
		{66 * time.Second, 10 * time.Second, "10"},
		{66 * time.Second, 2500 * time.Millisecond, "2"},
		{1500 * time.Millisecond, time.Minute, "2"},
		{time.Millisecond, time.Minute, "1"},
		{5 * time.Second, 400 * time.Millisecond, "0"},
	} {
		c := &ocap.Claims{ExpiresAt: 1_800_000_000}
		now := time.Unix(int64(c.ExpiresAt), 0).Add(-tc.lease)
		var ctx fasthttp.RequestCtx
		if code := refuseRate(&ctx, c, tc.wait, now); code != api.CodeRateLimited {
			t.Fatalf("code %s", code)
		}
		left := time.Unix(int64(c.ExpiresAt), 0).Sub(now)
		if got := string(ctx.Response.Header.Peek("Retry-After")); got != tc.header {
			t.Errorf("wait %v, lease left %v: Retry-After %s, want %s", tc.wait, left, got, tc.header)
		}
		var body struct {
			Error struct {
				RetryAfterMs int64 `json:"retry_after_ms"`
			} `json:"error"`
		}
		if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil || body.Error.RetryAfterMs > left.Milliseconds() {
			t.Errorf("wait %v, lease left %v: retry_after_ms %d (%v)", tc.wait, left, body.Error.RetryAfterMs, err)
		}
	}
}
