package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
)

// get answers status and body of a GET without a token.
func get(t *testing.T, o *opsStack, url string) (int, []byte) {
	t.Helper()
	resp, err := o.s.HTTP().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// TestCoordinatorReadyWhileKafkaUnreachable is issue #13's "the
// coordinator has no /readyz and /healthz says ok while Kafka is
// unreachable": with every metadata request to Kafka failing, /readyz
// turns 503 naming the kafka check while /healthz (liveness) stays 200;
// once Kafka answers again /readyz is 200 with every check ok.
func TestCoordinatorReadyWhileKafkaUnreachable(t *testing.T) {
	t.Parallel()
	o := startOpsWith(t, map[string]int32{"r": 1}, opsOptions{gateways: 1, coordinator: func(cfg *coordinator.Config) {
		cfg.BrokerTimeout = time.Second
		cfg.MetadataInterval = time.Second
	}})
	url := o.s.CoordinatorURL()
	if status, body := get(t, o, url+"/readyz"); status != http.StatusOK || !strings.Contains(string(body), `"kafka":"ok"`) {
		t.Fatalf("/readyz with Kafka up: %d %s", status, body)
	}
	var down atomic.Bool
	cluster := o.s.Kafka.Cluster()
	cluster.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if down.Load() {
			return nil, errors.New("injected: Kafka unreachable"), true // the broker drops the connection
		}
		return nil, nil, false
	})
	down.Store(true)
	harness.Eventually(t, 30*time.Second, "/readyz to report Kafka unreachable", func() (bool, string) {
		status, body := get(t, o, url+"/readyz")
		var e api.ErrorBody
		_ = json.Unmarshal(body, &e)
		return status == http.StatusServiceUnavailable && e.Error.Code == api.CodeUnavailable && strings.Contains(e.Error.Message, "kafka:"), string(body)
	})
	if status, body := get(t, o, url+"/healthz"); status != http.StatusOK {
		t.Fatalf("/healthz with Kafka down: %d %s, want 200 (liveness: restarting would not bring Kafka back)", status, body)
	}
	down.Store(false)
	harness.Eventually(t, 30*time.Second, "/readyz to be ready again", func() (bool, string) {
		status, body := get(t, o, url+"/readyz")
		return status == http.StatusOK && strings.Contains(string(body), `"kafka":"ok"`) && strings.Contains(string(body), `"store":"ok"`), string(body)
	})
}

// TestGatewayReadyWhileRefusingEveryFetch is issue #13's "a gateway
// started with the wrong issuer reports /readyz ready while refusing
// every fetch". A gateway no longer configures issuer, audience or keys
// (a configuration naming them is refused at start:
// cmd/capgate TestRetiredSettingsSayWhatReplacedThem); it learns them on its first
// sync. Ready now means: the issuer, audience and key ids it shows are
// the coordinator's (its JWKS), and a capability that coordinator mints
// is served — also after a key rotation, once the gateway is in sync.
func TestGatewayReadyWhileRefusingEveryFetch(t *testing.T) {
	t.Parallel()
	o := startOps(t, map[string]int32{"ready": 1})
	co := o.s.Coordinator().Config()
	check := func(when string) {
		t.Helper()
		var jwks api.JWKS
		status, body := get(t, o, o.s.CoordinatorURL()+"/.well-known/jwks.json")
		if status != http.StatusOK || json.Unmarshal(body, &jwks) != nil {
			t.Fatalf("jwks: %d %s", status, body)
		}
		var kids []string
		for _, k := range jwks.Keys {
			kids = append(kids, k.Kid)
		}
		slices.Sort(kids)
		status, body = get(t, o, o.s.GatewayURLs()[0]+"/readyz")
		var ready struct {
			Status, Issuer, Audience string
			Keys                     []string
		}
		if status != http.StatusOK || json.Unmarshal(body, &ready) != nil {
			t.Fatalf("%s: gateway /readyz %d %s", when, status, body)
		}
		if ready.Issuer != co.ID || ready.Audience != co.Cluster || !slices.Equal(ready.Keys, kids) {
			t.Fatalf("%s: ready gateway verifies with issuer %q audience %q keys %v; the coordinator is %q/%q with keys %v",
				when, ready.Issuer, ready.Audience, ready.Keys, co.ID, co.Cluster, kids)
		}
		capability, _ := sharedCapability(t, o, "ready", 0, time.Minute)
		if a := fetch(t, o, capability, "ready", 0, 0, false); a.status != http.StatusOK {
			t.Fatalf("%s: a ready gateway refused its coordinator's capability: %d %s", when, a.status, a.body)
		}
	}
	check("first sync")
	if err := o.s.MustAdmin(context.Background(), http.MethodPost, "/v1/admin/keys/rotate", nil, nil); err != nil {
		t.Fatal(err)
	}
	o.waitSynced(t)
	check("after a key rotation")
}
