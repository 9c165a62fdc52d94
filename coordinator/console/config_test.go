package console

import (
	"strings"
	"testing"
)

// TestConfigNamesTheBadKey: a setting out of bounds is refused at load,
// naming its key and the value.
func TestConfigNamesTheBadKey(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, c := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.MaxSubscribersPerSession = 0 }, "console.max_subscribers_per_session: must be within [1, 1000], got 0"},
		{func(c *Config) { c.MaxSubscribersPerSession = 1001 }, "console.max_subscribers_per_session: must be within [1, 1000], got 1001"},
		{func(c *Config) { c.MaxSubscribers = 0 }, "console.max_subscribers: must be within [1, 1000], got 0"},
	} {
		cfg := DefaultConfig()
		c.set(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	cfg := DefaultConfig()
	cfg.MaxSubscribers, cfg.MaxSubscribersPerSession = 4, 8 // the share is then every slot
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a share above max_subscribers: %v", err)
	}
}
