package console

import (
	"fmt"
	"time"
)

// Config is the coordinator's console: coordinator.console in the config.
// Every bound of what a browser can make the coordinator hold is here.
type Config struct {
	// Enabled serves the console at /console.
	Enabled bool `yaml:"enabled"`
	// SessionTTL is how long a login lasts (absolute, not sliding).
	SessionTTL time.Duration `yaml:"session_ttl"`
	// MaxSessions bounds the server-side session table; a login beyond it
	// first drops expired sessions, then the oldest.
	MaxSessions int `yaml:"max_sessions"`
	// MaxSubscribers bounds the live timeline streams open at once.
	MaxSubscribers int `yaml:"max_subscribers"`
	// MaxSubscribersPerSession is one session's share of them (every tab
	// of a group or the timeline holds one): a stream beyond it is 429
	// with Retry-After, so one operator's tabs cannot starve the others
	// (streamshare.go). Above MaxSubscribers it is MaxSubscribers.
	MaxSubscribersPerSession int `yaml:"max_subscribers_per_session"`
	// TimelineEvents is the size of the ring of recent timeline events; a
	// stream further behind than this is told it lagged.
	TimelineEvents int `yaml:"timeline_events"`
	// LoginMaxFailures failed logins per client address (IPv6: per /64)
	// are allowed within LoginFailureWindow (refilled evenly); beyond,
	// a login from that address is refused with 429 and Retry-After
	// before its token is looked at. LoginLimiterEntries bounds the
	// addresses tracked: when every tracked one is still failing, logins
	// from new addresses are refused the same way (loginlimit.go).
	LoginMaxFailures    int           `yaml:"login_max_failures"`
	LoginFailureWindow  time.Duration `yaml:"login_failure_window"`
	LoginLimiterEntries int           `yaml:"login_limiter_entries"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Enabled:        true,
		SessionTTL:     time.Hour,
		MaxSessions:    64,
		MaxSubscribers: 32,
		TimelineEvents: 4096,

		MaxSubscribersPerSession: 8,

		LoginMaxFailures:    5,
		LoginFailureWindow:  time.Minute,
		LoginLimiterEntries: 10000,
	}
}

// Validate reports the first bad setting, naming the field and the value.
func (c Config) Validate() error {
	switch {
	case c.SessionTTL < time.Minute || c.SessionTTL > 7*24*time.Hour:
		return fmt.Errorf("console.session_ttl: must be within [1m, 168h], got %s", c.SessionTTL)
	case c.MaxSessions < 1 || c.MaxSessions > 10000:
		return fmt.Errorf("console.max_sessions: must be within [1, 10000], got %d", c.MaxSessions)
	case c.MaxSubscribers < 1 || c.MaxSubscribers > 1000:
		return fmt.Errorf("console.max_subscribers: must be within [1, 1000], got %d", c.MaxSubscribers)
	case c.MaxSubscribersPerSession < 1 || c.MaxSubscribersPerSession > 1000:
		return fmt.Errorf("console.max_subscribers_per_session: must be within [1, 1000], got %d", c.MaxSubscribersPerSession)
	case c.TimelineEvents < 16 || c.TimelineEvents > 1<<20:
		return fmt.Errorf("console.timeline_events: must be within [16, 1048576], got %d", c.TimelineEvents)
	case c.LoginMaxFailures < 1 || c.LoginMaxFailures > 1000:
		return fmt.Errorf("console.login_max_failures: must be within [1, 1000], got %d", c.LoginMaxFailures)
	case c.LoginFailureWindow < time.Second || c.LoginFailureWindow > 24*time.Hour:
		return fmt.Errorf("console.login_failure_window: must be within [1s, 24h], got %s", c.LoginFailureWindow)
	case c.LoginLimiterEntries < 1 || c.LoginLimiterEntries > 1<<20:
		return fmt.Errorf("console.login_limiter_entries: must be within [1, 1048576], got %d", c.LoginLimiterEntries)
	}
	return nil
}
