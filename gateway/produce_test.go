package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

func TestProduceThenFetch(t *testing.T) {
	h := newHarness(t, nil)
	h.produce(2, 2)
	prod, _ := h.mint(withOps(capClaims(2), "produce"))
	body := `{"records":[{"key":"azE=","value":"djE=","headers":[{"key":"h","value":"eA=="}]},{"value":"djI="}]}`
	r := h.do(http.MethodPost, recordsURL(2), prod, strings.NewReader(body), "Content-Type", "application/json")
	var pr api.ProduceResponse
	if err := json.Unmarshal(r.body, &pr); err != nil || r.status != http.StatusOK || pr.BaseOffset != 2 || pr.Count != 2 {
		t.Fatalf("produce: %d %s", r.status, r.body)
	}
	fetch, _ := h.mint(capClaims(2))
	f := h.get(fetch, recordsPath(2, "offset=2")).fetch(t)
	if len(f.Records) != 2 || string(f.Records[0].Key) != "k1" || string(f.Records[0].Value) != "v1" ||
		f.Records[0].Headers[0].Key != "h" || string(f.Records[0].Headers[0].Value) != "x" ||
		f.Records[1].Key != nil || string(f.Records[1].Value) != "v2" || f.NextOffset != 4 {
		t.Fatalf("fetched %+v", f)
	}
	c := withOps(capClaims(99), "produce")
	unknown, _ := h.mint(c)
	expectError(t, h.do(http.MethodPost, recordsURL(99), unknown, strings.NewReader(`{"records":[{"value":"eA=="}]}`)), http.StatusNotFound, api.CodeNotFound)
}
