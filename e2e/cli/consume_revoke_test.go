package cli_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/capgate/capgate/client"
)

// recordID is one record of the demo topic.
type recordID struct {
	partition int32
	offset    int64
}

// sdkConsumer is an in-process SDK consumer of d's demo topic, marking
// records processed by hand (client.Config.ManualMarks), as an
// application that processes what Poll returned later.
func (d *devProcess) sdkConsumer(t *testing.T, group string, lost *atomic.Int32) *client.Consumer {
	t.Helper()
	creds := d.credentials(t)
	cfg := client.DefaultConfig()
	cfg.CoordinatorURL, cfg.Gateways = d.coordinator, []string{d.gateway}
	cfg.Group, cfg.Topics, cfg.Credential = group, []string{"demo"}, creds.ClientCredential
	cfg.ManualMarks = true
	cfg.CommitInterval = 200 * time.Millisecond
	c, err := client.NewConsumer(cfg, client.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))),
		client.OnLost(func([]client.Partition) { lost.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Join(ctx); err != nil {
		t.Fatalf("join: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

// pollUntil polls c until done holds for everything delivered so far
// (delivered counts each record's deliveries; every record Poll returns
// is added to it and to the slice returned).
func pollUntil(t *testing.T, c *client.Consumer, timeout time.Duration, what string, delivered map[recordID]int, done func() bool) []client.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var got []client.Record
	for !done() {
		rs, err := c.Poll(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: not within %s (%d records delivered this time, %d distinct in all)", what, timeout, len(got), len(delivered))
		}
		if err != nil {
			t.Fatalf("%s: poll: %v", what, err)
		}
		for _, r := range rs {
			if r.Topic != "demo" {
				t.Fatalf("delivered a record of topic %q", r.Topic)
			}
			delivered[recordID{r.Partition, r.Offset}]++
		}
		got = append(got, rs...)
	}
	return got
}

// TestRevokedWithUnprocessedRecordsDuplicatesAtMostThoseRecords is the
// 55,004-duplicate scenario with records in hand: an SDK consumer of
// `capgate dev` has been given (Poll) every record of the topic but has
// processed (marked) only part of them — none of one partition, all of
// two, a growing share of the others — and its timed commits have
// committed what it processed. An admin revokes the member; the consumer
// rejoins under a new member id and reads on, also records produced
// after the revoke. Duplicates (records Poll delivered twice) must be at
// most the records delivered but not processed at the revoke, and only
// those; no record is lost, and the final commit covers everything (the
// bug committed nothing while idle, so the rejoined member repeated all
// it had read: 55,004 duplicates).
func TestRevokedWithUnprocessedRecordsDuplicatesAtMostThoseRecords(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	const partitions, perPartition, after = 12, 100, 20 // demo/p gets perPartition, then after more
	lines := func(prefix string, n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "%s%d\n", prefix, i)
		}
		return b.String()
	}
	// n lines to each partition (keyless lines are sticky: a batch to one).
	produceEach := func(prefix string, n int) {
		for p := range partitions {
			run(t, 60*time.Second, lines(fmt.Sprintf("%s%d-", prefix, p), n), d.produceArgs("-p", fmt.Sprint(p))...)
		}
	}
	produceEach("a", perPartition)

	var lost atomic.Int32
	c := d.sdkConsumer(t, "unprocessed", &lost)
	delivered := map[recordID]int{}
	first := pollUntil(t, c, 60*time.Second, "every record delivered", delivered, func() bool { return len(delivered) >= partitions*perPartition })
	perP := map[int32][]client.Record{}
	for _, r := range first {
		perP[r.Partition] = append(perP[r.Partition], r)
	}
	if len(perP) != partitions {
		t.Fatalf("records of %d partitions delivered, want %d", len(perP), partitions)
	}

	// Process (mark) the first processed(p) records of each partition.
	processed := func(p int32) int { return min(perPartition, int(p)*perPartition/10) } // 0, 10%, ..., 90%, 100%, 100%
	unprocessed := map[recordID]bool{}
	wantCommitted := map[int32]int64{}
	for p, rs := range perP {
		slices.SortFunc(rs, func(a, b client.Record) int { return int(a.Offset - b.Offset) })
		if len(rs) != perPartition || rs[0].Offset != 0 || rs[len(rs)-1].Offset != perPartition-1 {
			t.Fatalf("demo/%d: delivered %d records, offsets %d..%d, want 0..%d", p, len(rs), rs[0].Offset, rs[len(rs)-1].Offset, perPartition-1)
		}
		k := processed(p)
		c.Mark(rs[:k]...)
		wantCommitted[p] = int64(k)
		for _, r := range rs[k:] {
			unprocessed[recordID{r.Partition, r.Offset}] = true
		}
	}
	fetchedNotProcessed := len(unprocessed)

	// The timed commits carry the marks (nothing else is committed: the
	// consumer is idle, and Poll marks nothing with ManualMarks).
	var member string
	eventually(t, 30*time.Second, "the timed commits committed what was processed", func() (bool, string) {
		g := d.group(t, "unprocessed")
		member = ""
		if len(g.Members) == 1 {
			member = g.Members[0].ID
		}
		var wrong []string
		for _, p := range g.Partitions {
			committed := int64(0)
			if p.Committed != nil {
				committed = *p.Committed
			}
			if committed != wantCommitted[p.Partition] {
				wrong = append(wrong, fmt.Sprintf("demo/%d committed %d, processed %d", p.Partition, committed, wantCommitted[p.Partition]))
			}
		}
		return len(g.Partitions) == partitions && len(wrong) == 0 && member == c.MemberID(),
			fmt.Sprintf("%d partitions, members %+v (ours %s): %v", len(g.Partitions), g.Members, c.MemberID(), wrong)
	})

	if status := d.admin(t, http.MethodPost, "/v1/admin/groups/unprocessed/members/"+member+"/revoke", nil); status != http.StatusOK {
		t.Fatalf("revoke member: %d", status)
	}
	eventually(t, 30*time.Second, "the consumer rejoined under a new member id", func() (bool, string) {
		g := d.group(t, "unprocessed")
		id := c.MemberID()
		return len(g.Members) == 1 && g.Members[0].ID == id && id != member && lost.Load() > 0,
			fmt.Sprintf("members %+v, ours %q (was %s), lost hooks %d", g.Members, id, member, lost.Load())
	})
	produceEach("b", after)
	total := partitions * (perPartition + after)
	second := pollUntil(t, c, 60*time.Second, "every record delivered after the rejoin", delivered, func() bool { return len(delivered) >= total })
	c.Mark(second...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}

	duplicates := 0
	for id, n := range delivered {
		if n > 1 {
			duplicates += n - 1
			if !unprocessed[id] {
				t.Errorf("demo/%d offset %d delivered %d times, although processed and committed before the revoke", id.partition, id.offset, n)
			}
		}
	}
	for p := range int32(partitions) {
		for o := range int64(perPartition + after) {
			if delivered[recordID{p, o}] == 0 {
				t.Errorf("demo/%d offset %d never delivered", p, o)
			}
		}
	}
	if len(delivered) != total {
		t.Errorf("%d distinct records delivered, want %d", len(delivered), total)
	}
	if duplicates > fetchedNotProcessed {
		t.Errorf("%d records delivered twice, more than the %d delivered but not processed at the revoke", duplicates, fetchedNotProcessed)
	}
	for _, p := range d.group(t, "unprocessed").Partitions {
		if p.Committed == nil || *p.Committed != perPartition+after {
			t.Errorf("demo/%d committed %v after the close, want %d", p.Partition, p.Committed, perPartition+after)
		}
	}
	t.Logf("%d deliveries, %d distinct, %d duplicates (bound: %d delivered but not processed at the revoke)",
		len(first)+len(second), len(delivered), duplicates, fetchedNotProcessed)
	d.stop(true)
}
