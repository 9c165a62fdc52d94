package gateway

import (
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// produceEach writes n records to partition p, one batch each.
func (h *harness) produceEach(p int32, n int) {
	h.t.Helper()
	for range n {
		h.produce(p, 1)
	}
}

// smallFetch is a 1-byte fetch (the record batch at offset, whole).
func smallFetch(p int32, offset int64) string {
	return recordsPath(p, "max_bytes=1&offset="+strconv.FormatInt(offset, 10))
}

// TestFencedHolderReadsNothingReadAhead is the attack on the read-ahead:
// a holder reads small fetches in a row, so the gateway holds the
// partition's next records in memory, then loses the partition. Its next
// fetch, which the read-ahead could answer without asking Kafka, is
// refused like any other, and so is one past its capability's offset
// range; the new holder reads on from the read-ahead.
func TestFencedHolderReadsNothingReadAhead(t *testing.T) {
	h := newHarness(t, nil)
	h.produceEach(0, 8)
	old, _ := h.mint(capClaims(0))
	for offset := range int64(3) {
		if f := h.get(old, smallFetch(0, offset)).fetch(t); len(f.Records) != 1 || f.NextOffset != offset+1 {
			t.Fatalf("offset %d: %d records, next %d", offset, len(f.Records), f.NextOffset)
		}
	}
	hits := h.gw.broker.FetchAheadStats().Hits.Load()
	if hits == 0 {
		t.Fatal("three 1-record fetches in a row: none answered from read-ahead")
	}
	seq := h.sync.push(api.SyncResponse{Fences: []api.Fence{{Group: "g", Topic: testTopic, Partition: 0, Epoch: 2}}})
	h.sync.waitAck(t, seq)
	expectError(t, h.get(old, smallFetch(0, 3)), http.StatusConflict, api.CodeCapabilityRevoked)
	expectError(t, h.get(old, smallFetch(0, 3), "Accept", api.MediaRecordBatch), http.StatusConflict, api.CodeCapabilityRevoked)

	c := capClaims(0)
	c.Epoch, c.Subject = 2, "member-2"
	c.Offsets = &ocap.OffsetRange{From: 3, To: 5}
	newer, _ := h.mint(c)
	for offset := int64(3); offset < 5; offset++ {
		if f := h.get(newer, smallFetch(0, offset)).fetch(t); len(f.Records) != 1 || f.NextOffset != offset+1 {
			t.Fatalf("new holder at %d: %d records, next %d", offset, len(f.Records), f.NextOffset)
		}
	}
	if h.gw.broker.FetchAheadStats().Hits.Load() <= hits {
		t.Fatal("the new holder's fetches in a row were not answered from read-ahead")
	}
	expectError(t, h.get(newer, smallFetch(0, 5)), http.StatusForbidden, api.CodeForbidden)
	expectError(t, h.get(newer, smallFetch(0, 5), "Accept", api.MediaRecordBatch), http.StatusForbidden, api.CodeForbidden)
}

// TestFenceAfterReadAheadAnswerRefuses: the fence lands between the
// read-ahead's answer and the gateway's second decision — the fetch
// admitted under the old epoch, answered from memory, is still refused,
// never data.
func TestFenceAfterReadAheadAnswerRefuses(t *testing.T) {
	h := newHarness(t, nil)
	h.produceEach(0, 6)
	tok, _ := h.mint(capClaims(0))
	for offset := range int64(3) {
		h.get(tok, smallFetch(0, offset)).fetch(t)
	}
	hits := h.gw.broker.FetchAheadStats().Hits.Load()
	var once sync.Once
	h.gw.afterFetch = func() {
		once.Do(func() {
			h.sync.push(api.SyncResponse{Fences: []api.Fence{{Group: "g", Topic: testTopic, Partition: 0, Epoch: 2}}})
			waitFor(t, "the fence applied", func() bool { return h.gw.view.Fence("g", testTopic, 0) == 2 })
		})
	}
	expectError(t, h.get(tok, smallFetch(0, 3)), http.StatusConflict, api.CodeCapabilityRevoked)
	if h.gw.broker.FetchAheadStats().Hits.Load() != hits+1 {
		t.Fatal("the fetch was not answered from the read-ahead: the test proves nothing")
	}
}
