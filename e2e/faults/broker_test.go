package faults

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/e2e/harness"
)

// TestBrokerFetchFaults injects Kafka fetch errors with kfake's Fault (the
// Fetch key): first UNKNOWN_SERVER_ERROR on half the partitions, then
// NOT_LEADER_OR_FOLLOWER (which the gateway's broker client retries after
// refreshing metadata) on every partition. A fetch through a gateway
// either serves exactly the records Kafka holds or answers 5xx with a JSON
// error body — never wrong data; the consumers ride it out, and once the
// faults are gone nothing is lost.
func TestBrokerFetchFaults(t *testing.T) {
	t.Parallel()
	const group = "brokerfault"
	c := harness.Start(t, harness.Options{Groups: []string{group}, Binaries: binaries})
	prod := c.StartProducer(t, produceEvery)
	c.StartMember(t, harness.MemberOptions{Name: "a", Group: group})
	c.StartMember(t, harness.MemberOptions{Name: "b", Group: group})
	waitSettled(t, c, group, 2)
	waitFlowing(t, c, group, 200)
	capability := sharedCapability(t, c, 0)
	var answers []rawAnswer

	faulted := []int32{0, 1, 2}
	fault := c.Kafka.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: c.Topic(), Partitions: faulted, Err: kerr.UnknownServerError, Count: -1})
	c.Log.AddFault("broker-fault", "unknown_server_error")
	installed := harness.Now()
	answers = append(answers, fetchFor(t, c, capability, 2*time.Second)...)
	fault.Remove()
	removed := harness.Now()
	c.Log.AddFault("broker-heal", "unknown_server_error")
	waitFlowing(t, c, group, 100)

	fault = c.Kafka.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: c.Topic(), Err: kerr.NotLeaderForPartition, Count: -1})
	c.Log.AddFault("broker-fault", "not_leader_or_follower")
	during := make(chan []rawAnswer)
	go func() { during <- fetchFor(t, c, capability, 2*time.Second) }() // also the answers of fetches retried across the heal
	time.Sleep(time.Second)                                             // the fault's length
	fault.Remove()
	c.Log.AddFault("broker-heal", "not_leader_or_follower")
	answers = append(answers, <-during...)
	waitFlowing(t, c, group, 200)
	s := finish(t, c, prod, group)

	checkRawAnswers(t, s, answers)
	for _, f := range s.Fetches {
		if f.Start > installed && f.End < removed && f.Key.Partition <= faulted[len(faulted)-1] && f.OK() {
			t.Errorf("%s served %s@ep%d %s..%s while every fetch of it failed in Kafka", f.Gateway, f.Key, f.Epoch, f.Start, f.End)
		}
	}
}

// rawAnswer is one fetch the test sent itself.
type rawAnswer struct {
	status      int
	contentType string
	body        []byte
}

// fetchFor fetches partition 0 from offset 0 through every gateway in
// turn, every 20ms, for d.
func fetchFor(t *testing.T, c *harness.Cluster, capability string, d time.Duration) []rawAnswer {
	t.Helper()
	var out []rawAnswer
	for end := time.Now().Add(d); time.Now().Before(end); {
		for _, gw := range c.GatewayURLs() {
			status, contentType, body := rawFetch(t, c, gw, capability, 0, 0)
			out = append(out, rawAnswer{status, contentType, body})
		}
		time.Sleep(20 * time.Millisecond) // pacing, not a wait
	}
	return out
}

// checkRawAnswers: every answer is either 200 with exactly the produced
// values at their offsets, or a 5xx with a JSON error body; at least one
// 502 broker_error came through.
func checkRawAnswers(t *testing.T, s harness.Snapshot, answers []rawAnswer) {
	t.Helper()
	produced := map[int64]string{}
	for _, p := range s.Produced {
		if p.Partition == 0 {
			produced[p.Offset] = p.Value
		}
	}
	codes := map[string]int{}
	for _, a := range answers {
		if a.status == http.StatusOK {
			codes["200"]++
			var f api.FetchResponse
			if err := json.Unmarshal(a.body, &f); err != nil {
				t.Errorf("200 with a body that is not a fetch answer: %v: %.200s", err, a.body)
				continue
			}
			for _, r := range f.Records {
				if want, ok := produced[r.Offset]; !ok || string(r.Value) != want {
					t.Errorf("offset %d served %q, produced %q (known %v)", r.Offset, r.Value, want, ok)
				}
			}
			continue
		}
		code := errorCode(t, a.contentType, a.body)
		codes[fmt.Sprintf("%d %s", a.status, code)]++
		if a.status < 500 {
			t.Errorf("fetch under a broker fault answered %d %s, want 200 or 5xx", a.status, code)
		}
	}
	if codes[fmt.Sprintf("%d %s", http.StatusBadGateway, api.CodeBrokerError)] == 0 {
		t.Errorf("no 502 broker_error while Kafka failed every fetch: %v", codes)
	}
	t.Logf("the test's own fetches under broker faults: %v", codes)
}
