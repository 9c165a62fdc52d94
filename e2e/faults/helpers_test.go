package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
)

// wait is the generous deadline of every wait (harness.Wait).
const wait = harness.Wait

// produceEvery is the producer's interval per partition.
const produceEvery = 20 * time.Millisecond

// owners: see harness.Cluster.Owners.
func owners(c *harness.Cluster, group string, members int) (map[string][]int32, string) {
	return c.Owners(group, members)
}

// waitSettled: see harness.Cluster.WaitSettled.
func waitSettled(t *testing.T, c *harness.Cluster, group string, members int) map[string][]int32 {
	t.Helper()
	return c.WaitSettled(t, group, members)
}

// waitFlowing: see harness.Cluster.WaitFlowing.
func waitFlowing(t *testing.T, c *harness.Cluster, group string, n int) {
	t.Helper()
	c.WaitFlowing(t, group, n)
}

// finish: see harness.Cluster.Finish.
func finish(t *testing.T, c *harness.Cluster, prod *harness.Producer, group string) harness.Snapshot {
	t.Helper()
	return c.Finish(t, prod, group)
}

// rawFetch sends one fetch with capability to a gateway and returns the
// status, the Content-Type and the body.
func rawFetch(t *testing.T, c *harness.Cluster, gatewayURL, capability string, partition int32, offset int64) (int, string, []byte) {
	t.Helper()
	u := fmt.Sprintf("%s/v1/topics/%s/partitions/%d/records?offset=%d", gatewayURL, c.Topic(), partition, offset)
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+capability)
	resp, err := c.HTTP().Do(req)
	if err != nil {
		return 0, "", []byte(err.Error())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

// errorCode decodes an error body's code, failing t when the body is not
// the JSON error shape.
func errorCode(t *testing.T, contentType string, body []byte) api.Code {
	t.Helper()
	var e api.ErrorBody
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code == "" {
		t.Errorf("error body is not {\"error\":{\"code\":...}} (Content-Type %q): %.200s", contentType, body)
	}
	return e.Error.Code
}

// sharedCapability mints a non-exclusive fetch capability for partition
// through the admin API.
func sharedCapability(t *testing.T, c *harness.Cluster, partition int32) string {
	t.Helper()
	var grant api.CapabilityResponse
	c.MustAdmin(t, http.MethodPost, "/v1/admin/capabilities",
		coordinator.SharedGrantRequest{Topic: c.Topic(), Partition: partition, Ops: []string{"fetch"}, TTLMs: 600_000, Holder: "fault-test"}, &grant)
	return grant.Capability
}

// postJSON sends a JSON POST with a bearer token and returns the status
// and body.
func postJSON(t *testing.T, c *harness.Cluster, u, token string, in any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.HTTP().Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// grantsTo: see harness.GrantsTo.
func grantsTo(s harness.Snapshot, member string, since harness.Time) []harness.Grant {
	return harness.GrantsTo(s, member, since)
}

// partitionsOf: see harness.PartitionsOf.
func partitionsOf(grants []harness.Grant) []int32 { return harness.PartitionsOf(grants) }
