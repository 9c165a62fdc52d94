package store_test

import (
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/store"
)

// TestStateTopicNameSpace: the default state topics are in capgate's
// reserved name space (capgate-state*), as is a per-deployment name
// (capgate-state-prod); a name from before the name space still
// validates (the deployment keeps its log) but is reported by
// UnreservedTopics and warned, loudly, every time the log is opened.
func TestStateTopicNameSpace(t *testing.T) {
	t.Setenv("CAPGATE_TEST_KEK", store.GenerateKEK())
	for _, topic := range []string{"capgate-state", "capgate-state-prod"} {
		c := store.DefaultKafkaConfig()
		c.Topic, c.KEKEnv = topic, "CAPGATE_TEST_KEK"
		core, logs := observer.New(zapcore.WarnLevel)
		if _, err := c.Options(nil, "prod", "c1", 0, zap.New(core)); err != nil {
			t.Fatal(err)
		}
		if u := c.UnreservedTopics(); len(u) != 0 || logs.Len() != 0 {
			t.Errorf("topic %s: unreserved %v, %d warnings", topic, u, logs.Len())
		}
	}
	c := store.DefaultKafkaConfig()
	c.Topic, c.KEKEnv = "rt5-state", "CAPGATE_TEST_KEK"
	if err := c.Validate(); err != nil {
		t.Fatalf("a name from before the name space: %v, want accepted", err)
	}
	if u := c.UnreservedTopics(); !slices.Equal(u, []string{"rt5-state", "rt5-state-snapshots"}) {
		t.Fatalf("unreserved: %v", u)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	if _, err := c.Options(nil, "rt5", "c1", 0, zap.New(core)); err != nil {
		t.Fatal(err)
	}
	warned := logs.FilterMessageSnippet("outside capgate's reserved name space capgate-state*").All()
	if len(warned) != 1 || !slices.Equal(warned[0].ContextMap()["topics"].([]any), []any{"rt5-state", "rt5-state-snapshots"}) {
		t.Fatalf("warnings: %v", logs.All())
	}
}
