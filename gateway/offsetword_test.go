package gateway

import (
	"net/http"
	"testing"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// TestFetchAtEarliestAndLatest: offset=earliest|latest is resolved against
// the partition's log after the capability is checked; an offset caveat
// applies to the resolved offset; anything else non-numeric is 400.
func TestFetchAtEarliestAndLatest(t *testing.T) {
	h := newHarness(t, nil)
	want := h.produce(1, 4)
	tok, _ := h.mint(capClaims(1))

	f := h.get(tok, recordsPath(1, "offset=earliest")).fetch(t)
	checkRecords(t, f.Records, want, 0)
	if f.NextOffset != 4 {
		t.Fatalf("next_offset %d, want 4", f.NextOffset)
	}
	r := h.get(tok, recordsPath(1, "offset=latest&max_wait_ms=0"))
	if f = r.fetch(t); r.status != http.StatusOK || len(f.Records) != 0 || f.NextOffset != 4 {
		t.Fatalf("latest: %d %s", r.status, r.body)
	}
	if r := h.get("", recordsPath(1, "offset=earliest")); r.status != http.StatusUnauthorized {
		t.Fatalf("earliest without a capability: %d", r.status)
	}
	limited := capClaims(1)
	limited.Offsets = &ocap.OffsetRange{From: 2, To: 10}
	ltok, _ := h.mint(limited)
	if r := h.get(ltok, recordsPath(1, "offset=earliest")); r.status != http.StatusForbidden {
		t.Fatalf("earliest (0) below the caveat [2,10): %d %s", r.status, r.body)
	}
	r = h.get(tok, recordsPath(1, "offset=first"))
	if r.status != http.StatusBadRequest || r.errorCode() != api.CodeBadRequest {
		t.Fatalf("offset=first: %d %s", r.status, r.body)
	}
}
