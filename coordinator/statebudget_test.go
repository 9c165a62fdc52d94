package coordinator_test

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/api"
)

// redteam4 #1 over HTTP: commit metadata counts in limits.state_bytes. A
// member commits 4 KiB of metadata partition after partition; once the
// estimate is full the next growing commit is 409 limit_exceeded naming
// state_bytes (as a join past it is), and a commit that does not grow it
// (no metadata) is still accepted.
func TestCommitMetadataPastStateBytesOverHTTP(t *testing.T) {
	e := newEnv(t, map[string]int32{"orders": 8})
	e.cfg.Groups.Limits.StateBytes = 24 << 10 // the group, its 8 partitions and one member (~17 KiB), and one full metadata
	h := e.start(t)
	m := h.join(t, "g", h.clientCredential(t, []string{"g"}, []string{"orders"}), api.JoinRequest{Topics: []string{"orders"}})
	full := strings.Repeat("m", e.cfg.Groups.Limits.CommitMetadataBytes)
	commit := func(partition int32, metadata string) (int, []byte) {
		t.Helper()
		g, ok := m.grant("orders", partition)
		if !ok {
			t.Fatalf("no grant of orders/%d", partition)
		}
		status, body, _ := h.do(t, "POST", "/v1/groups/g/commit", m.token, api.CommitRequest{
			Offsets: []api.CommitOffset{{Topic: "orders", Partition: partition, Offset: 0, Metadata: metadata, Capability: g.Capability}}})
		return status, body
	}
	var partition int32
	var status int
	var body []byte
	for ; partition < 8; partition++ {
		if status, body = commit(partition, full); status != 200 {
			break
		}
	}
	d := errorDetails(t, body)
	if partition == 0 || status != 409 || errorCode(t, body) != api.CodeLimitExceeded ||
		d["limit"] != "coordinator.groups.limits.state_bytes" || d["max"] != float64(24<<10) || !strings.Contains(string(body), "metadata") {
		t.Fatalf("commit %d of %d bytes of metadata in %d bytes of state: %d %.300s, want 409 limit_exceeded naming state_bytes",
			partition+1, len(full), 24<<10, status, body)
	}
	if status, body := commit(partition, ""); status != 200 {
		t.Fatalf("a commit without metadata, which does not grow the state: %d %s", status, body)
	}
}
