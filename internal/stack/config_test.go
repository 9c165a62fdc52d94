package stack

import (
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/gateway"
)

// configs are the configurations a stack with timing tm gives its
// coordinator and first gateway, without starting anything.
func configs(t *testing.T, tm Timing) (coordinator.Config, gateway.Config) {
	t.Helper()
	s := &Stack{opts: Options{Dir: t.TempDir(), Timing: tm}, AdminToken: "a", SyncToken: "s"}
	kafka, err := broker.StartEmbedded(broker.EmbeddedConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kafka.Close)
	s.Kafka = kafka
	co := &Coordinator{s: s, Name: "coordinator", partAddr: partAddr{Addr: "127.0.0.1:7070", URL: "http://127.0.0.1:7070"}, DataDir: "/tmp/x/coordinator"}
	s.coordinators = []*Coordinator{co}
	g := &Gateway{s: s, ID: "gateway-1", partAddr: partAddr{Addr: "127.0.0.1:8080"}, coordinatorURL: co.URL}
	return co.Config(), g.Config()
}

// TestConfigsAgree: with the shipped defaults (capgate dev, the
// benchmarks) and with the test timing, both parts' configurations
// validate and satisfy the rules that tie them together.
func TestConfigsAgree(t *testing.T) {
	for name, tm := range map[string]Timing{"shipped": {}, "test": TestTiming()} {
		cc, gc := configs(t, tm)
		if err := cc.Validate(); err != nil {
			t.Errorf("%s: coordinator config: %v", name, err)
		}
		if err := gc.Validate(); err != nil {
			t.Errorf("%s: gateway config: %v", name, err)
		}
		if err := CheckSyncTimings(cc, gc); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if string(gc.SyncToken) != "s" || len(cc.SyncTokenHashes) != 1 || len(cc.AdminTokenHashes) != 1 || cc.SyncTokenHashes[0] != coordinator.HashSecret("s") {
			t.Errorf("%s: sync token %q, hashes %v %v", name, gc.SyncToken, cc.SyncTokenHashes, cc.AdminTokenHashes)
		}
	}
}

func TestCheckSyncTimings(t *testing.T) {
	cc, gc := configs(t, Timing{})
	late := gc
	late.SyncTimeout = cc.Groups.GatewayTimeout - cc.Groups.MaxClockSkew
	if err := CheckSyncTimings(cc, late); err == nil || !strings.Contains(err.Error(), "gateway.sync_timeout") {
		t.Errorf("sync_timeout at gateway_timeout - max_clock_skew: %v", err)
	}
	held := cc
	held.Groups.SyncWaitMax = gc.SyncTimeout
	held.Groups.GatewayTimeout = 30 * time.Second
	if err := CheckSyncTimings(held, gc); err == nil || !strings.Contains(err.Error(), "sync_wait_max") {
		t.Errorf("sync_wait_max at sync_timeout: %v", err)
	}
}
