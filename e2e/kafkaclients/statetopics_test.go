package kafkaclients

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/internal/stack"
)

// startNeighbour starts a second capgate deployment (coordinator id
// "coord-b", cluster b, its state in the Kafka log capgate-state-b) on
// the Kafka of the deployment a: two deployments sharing one Kafka, as
// staging beside prod, or two teams' gateway pools.
func startNeighbour(t *testing.T, a *Stack) *stack.Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := stack.Start(ctx, stack.Options{
		Dir: t.TempDir(), KafkaState: true,
		Logger: func(part string) *zap.Logger { return sdk.Logger(t).Named("b-" + part) },
		Coordinator: func(_ int, cfg *coordinator.Config) {
			cfg.Broker = a.BrokerConfig()
			cfg.ID, cfg.Cluster = "coord-b", "b"
			cfg.KafkaState.Topic = "capgate-state-b"
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("neighbour: %v", err)
		}
	})
	return b
}

// join posts a join of group naming topics to the coordinator at url
// with bearer and returns the status and the error body (if any).
func joinAt(t *testing.T, url, bearer, group string, topics []string) (int, api.ErrorBody) {
	t.Helper()
	status, raw := postJoin(t, url, bearer, group, api.JoinRequest{ClientID: "thief", Topics: topics})
	var out api.ErrorBody
	if status != http.StatusOK {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("join %s: %d %s", group, status, raw)
		}
	}
	return status, out
}

// postJoin posts join to the coordinator at url for group with bearer:
// the status and the body.
func postJoin(t *testing.T, url, bearer, group string, join api.JoinRequest) (int, []byte) {
	t.Helper()
	body, _ := json.Marshal(join)
	req, err := http.NewRequest(http.MethodPost, url+"/v1/groups/"+group+"/join", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// TestAnotherDeploymentsStateLogIsNeverGranted (redteam5 #4): with two
// capgate deployments on one Kafka, a client credential of the first for
// any topic ("*", what capgate dev writes) joined a group on the
// second's state topic and read every group name, member id and
// committed offset of the second through its own gateway: a coordinator
// refused only its own state topics. capgate-state* is now a reserved
// name space: the join is 403 naming it, the admin grant and lease too,
// and the first deployment's Kafka listener does not list the topics in
// Metadata nor answer ListOffsets for them; its own topic stays visible.
func TestAnotherDeploymentsStateLogIsNeverGranted(t *testing.T) {
	a := Start(t, Options{Partitions: 2})
	startNeighbour(t, a)
	var minted coordinator.ClientResponse
	req := coordinator.ClientRequest{Name: "any", Groups: []string{"*"}, Topics: []string{"*"}, TTLMs: time.Hour.Milliseconds()}
	if status, raw := a.Admin(t, http.MethodPost, "/v1/admin/clients", req, &minted); status != http.StatusOK {
		t.Fatalf("mint: %d %s", status, raw)
	}
	for _, topic := range []string{"capgate-state-b", "capgate-state-b-snapshots"} {
		status, refusal := joinAt(t, a.CoordinatorURL, minted.Credential, "steal", []string{topic})
		msg := refusal.Error.Message
		t.Logf("join %s: %d %s", topic, status, msg)
		if status != http.StatusForbidden || refusal.Error.Code != api.CodeForbidden ||
			!strings.Contains(msg, `"`+topic+`"`) || !strings.Contains(msg, "capgate-state*") || !strings.Contains(msg, "another capgate deployment") {
			t.Fatalf("join of the other deployment's %s with a credential for any topic: %d %q, want 403 naming the reserved name space", topic, status, msg)
		}
	}
	grant := coordinator.SharedGrantRequest{Topic: "capgate-state-b", Partition: 0, TTLMs: time.Minute.Milliseconds(), Holder: "thief"}
	if status, raw := a.Admin(t, http.MethodPost, "/v1/admin/capabilities", grant, nil); status != http.StatusForbidden {
		t.Fatalf("admin grant on capgate-state-b/0: %d %s, want 403", status, raw)
	}
	lease := coordinator.LeaseRequest{Holder: "thief", TTLMs: time.Minute.Milliseconds()}
	if status, raw := a.Admin(t, http.MethodPost, "/v1/admin/groups/steal/partitions/capgate-state-b/0/lease", lease, nil); status != http.StatusForbidden {
		t.Fatalf("admin lease of capgate-state-b/0: %d %s, want 403", status, raw)
	}

	cl := kgoClient(t, a.KafkaAddrs(), minted.Credential, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, kmsg.NewPtrMetadataRequest()) // every topic
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, tp := range resp.(*kmsg.MetadataResponse).Topics {
		listed = append(listed, *tp.Topic)
	}
	if !slices.Contains(listed, "orders") || slices.ContainsFunc(listed, func(s string) bool { return strings.HasPrefix(s, "capgate-state") }) {
		t.Fatalf("Metadata of every topic through the first deployment's listener: %v; want orders and no capgate-state*", listed)
	}
	probe := dialRaw(t, a.KafkaAddrs()[0])
	if resp := probe.authenticate("PLAIN", minted.Credential); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %d", resp.ErrorCode)
	}
	if code := probe.roundTrip(listLatest("capgate-state-b", 0)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("ListOffsets of capgate-state-b: error %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
}
