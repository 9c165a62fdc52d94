package tenants_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/e2e/sdk"
)

// attenuate mints a child of parent through the coordinator.
func (cl client) attenuate(t testing.TB, parent string, req api.AttenuateRequest) (int, api.CapabilityResponse, []byte) {
	t.Helper()
	status, raw := cl.coordinator(t, http.MethodPost, "/v1/capabilities/attenuate", parent, req)
	var out api.CapabilityResponse
	if status == http.StatusOK {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
	}
	return status, out, raw
}

// TestAttenuationDoesNotMultiplyTheBudget is defect 5 of issue #10: a
// child limited to 2,000 B/s was refused past its allowance, but its
// holder minted 10 grandchildren with the same limit, each with a budget
// of its own, and read 0.6-1 MB/s. Budgets now count against the root of
// the chain: ten grandchildren fetching as fast as the gateway lets them
// read, together, no more than the limit over the window plus the
// bucket's one second and one batch.
func TestAttenuationDoesNotMultiplyTheBudget(t *testing.T) {
	t.Parallel()
	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 1})
	cl := client{c}
	value := strings.Repeat("v", 300)
	for i := range 300 { // one record per batch: a batch is one record
		if _, err := c.Broker.Produce(context.Background(), c.Topic, 0, []*kgo.Record{{Value: []byte(fmt.Sprint(i, value))}}); err != nil {
			t.Fatal(err)
		}
	}
	cred, _ := cl.credential(t, "svc", "g")
	_, _, m := cl.join(t, "m", "g", cred, api.JoinRequest{Topics: []string{c.Topic}, SessionTimeoutMs: 60_000})
	if m == nil {
		t.Fatal("join refused")
	}
	const limit = 2000
	status, child, raw := cl.attenuate(t, m.grants[0][0].Capability, api.AttenuateRequest{Ops: []string{"fetch"}, MaxBytesPerSec: limit})
	if status != http.StatusOK {
		t.Fatalf("child: %d %s", status, raw)
	}
	var grandchildren []string
	for range 10 {
		status, g, raw := cl.attenuate(t, child.Capability, api.AttenuateRequest{MaxBytesPerSec: limit})
		if status != http.StatusOK {
			t.Fatalf("grandchild: %d %s", status, raw)
		}
		grandchildren = append(grandchildren, g.Capability)
	}
	gw := c.GatewayURLs()[0]
	var served, batch atomic.Int64
	const window = 3 * time.Second
	start := time.Now()
	var wg sync.WaitGroup
	for _, g := range grandchildren {
		wg.Add(1)
		go func() {
			defer wg.Done()
			offset := int64(0)
			for time.Since(start) < window {
				url := fmt.Sprintf("%s/v1/topics/%s/partitions/0/records?offset=%d&max_wait_ms=0&max_bytes=1000000", gw, c.Topic, offset)
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("Authorization", "Bearer "+g)
				resp, err := c.HTTP().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					var f api.FetchResponse
					if err := json.Unmarshal(body, &f); err != nil {
						t.Error(err)
						return
					}
					served.Add(int64(len(body)))

					if len(f.Records) == 1 {
						batch.Store(max(batch.Load(), int64(len(body))))
					}
					offset = f.NextOffset
				case http.StatusTooManyRequests:
					var e api.ErrorBody
					_ = json.Unmarshal(body, &e)
					wait, _ := e.Error.Details["retry_after_ms"].(float64)
					time.Sleep(min(time.Duration(wait)*time.Millisecond, 200*time.Millisecond)) // as a client honouring Retry-After
				default:
					t.Errorf("fetch: %d %s", resp.StatusCode, body)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	allowed := int64(elapsed.Seconds()*limit) + limit + max(batch.Load(), 1000)
	t.Logf("10 grandchildren of a %d B/s child read %d B in %v (%.0f B/s); allowed %d B (limit × time + 1 s of burst + one batch of %d B)",
		limit, served.Load(), elapsed.Round(time.Millisecond), float64(served.Load())/elapsed.Seconds(), allowed, batch.Load())
	if served.Load() > allowed {
		t.Errorf("read %d B, more than the %d B the child's limit allows", served.Load(), allowed)
	}
	if served.Load() < limit {
		t.Errorf("read %d B: the limit starved the holder", served.Load())
	}
}

// TestAttenuationIsRateLimited: minting children is itself bounded per
// chain root (attenuate_rate, attenuate_burst), so a holder cannot mint
// without end; past the burst the coordinator answers 429 with
// Retry-After.
func TestAttenuationIsRateLimited(t *testing.T) {
	t.Parallel()
	_, cl, m := soloMember(t, 1)
	parent := m.grants[0][0].Capability
	refused := 0
	for i := range 120 {
		parentOf := parent
		status, child, raw := cl.attenuate(t, parentOf, api.AttenuateRequest{})
		switch status {
		case http.StatusOK:
			if i < 6 {
				parent = child.Capability // a deeper chain draws from the same root
			}
		case http.StatusTooManyRequests:
			if codeOf(raw) != api.CodeRateLimited {
				t.Fatalf("429 with %s", raw)
			}
			refused++
		default:
			t.Fatalf("attenuate %d: %d %s", i, status, raw)
		}
	}
	if refused == 0 {
		t.Fatal("120 attenuations of one chain in a burst, none refused")
	}
	t.Logf("%d of 120 attenuations refused 429", refused)
}
