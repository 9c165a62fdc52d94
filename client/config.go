package client

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/client/session"
	"github.com/capgate/capgate/internal/coordinators"
	"github.com/capgate/capgate/tlsconf"
)

// Config is the consumer's configuration. The credential is never printed:
// String, GoString, MarshalJSON and MarshalLogObject redact it.
type Config struct {
	// CoordinatorURL is the coordinator's base URL, e.g. http://127.0.0.1:7070,
	// or its replicas' URLs comma-separated, as $CAPGATE_COORDINATOR_URL
	// holds them under capgate dev --replicas (the first is called first,
	// the others count as CoordinatorURLs).
	CoordinatorURL string `yaml:"coordinator_url"`
	// CoordinatorURLs are the other coordinator replicas' base URLs. The
	// consumer calls CoordinatorURL first; a replica that answers 421
	// not_leader naming one of these (or CoordinatorURL) is left for that
	// leader within the same call, and an unreachable one for the next URL
	// (internal/coordinators). Empty: one coordinator.
	CoordinatorURLs []string `yaml:"coordinator_urls"`
	// Gateways are the gateways' base URLs, tried in order; a fetch moves
	// to the next on 503 or a connection error. An element may hold
	// several URLs comma-separated ($CAPGATE_GATEWAY_URLS as one string).
	Gateways []string `yaml:"gateways"`
	// Group is the consumer group to join.
	Group string `yaml:"group"`
	// Topics or TopicPattern is the subscription; exactly one. TopicPattern
	// is a Go (RE2) regexp the whole topic name must match, as Java's
	// subscribe(Pattern): "orders-.*" subscribes to orders-eu, "^orders-"
	// to nothing (franz-go's ConsumeRegex and librdkafka match a part).
	// Join warns when the pattern matches no topic (the member waits for
	// one to be created).
	Topics       []string `yaml:"topics"`
	TopicPattern string   `yaml:"topic_pattern"`
	// InstanceID makes the membership static: a restart within
	// session_timeout takes its partitions back. Empty: dynamic.
	InstanceID string `yaml:"instance_id"`
	// ClientID names the application in the coordinator's member ids.
	ClientID string `yaml:"client_id"`
	// Credential is the client credential presented on join (a secret);
	// with WithCredentialSource, the source's instead (may be empty). The
	// member's token never outlives the credential it joined with: the
	// consumer renews its member with the current one before then.
	Credential string `yaml:"credential"`
	// Assignor names the group's assignor; empty keeps the group's.
	Assignor string `yaml:"assignor"`
	// SessionTimeout: a member silent this long is dead.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// HeartbeatWait caps how long a heartbeat is held waiting for news.
	HeartbeatWait time.Duration `yaml:"heartbeat_wait"`
	// FetchMaxBytes caps one fetch's records. A partition's fetch asks
	// for its share of BufferMaxBytes (over two fetches per partition
	// fetched), at least 1 MiB (or FetchMaxBytes when smaller), at most
	// FetchMaxBytes: a consumer of few partitions fetches large (fewer
	// requests per record), one of many 1 MiB at a time.
	FetchMaxBytes int32 `yaml:"fetch_max_bytes"`
	// FetchMaxWait is how long a gateway holds a fetch with no records.
	FetchMaxWait time.Duration `yaml:"fetch_max_wait"`
	// GatewayFetchesMax bounds this consumer's fetches in flight to one
	// gateway (fetched ahead included). Each is an HTTP/1.1 request of
	// its own on a connection of its own, a long poll while its
	// partition is idle. They take slots of the consumer's FetchPool,
	// shared with the process's other consumers (by default
	// DefaultFetchPoolMax, 1024, per gateway address in all, and one set
	// of connections): this is the most one consumer holds of them.
	// Fetches past either bound wait their turn (FetchPool); a fetch's
	// request_timeout starts when it is sent. Default 1024, the
	// gateway's default in-flight fetches per tenant
	// (max_inflight_fetches_per_tenant: a quarter of its 4096): one
	// consumer of 2,000 partitions opened some 1,200 connections and had
	// thousands of fetches refused 429 too_many_fetches a minute past
	// that limit, retried after a backoff. A consumer of more partitions
	// than it gets slots polls each idle one every partitions/slots ×
	// FetchMaxWait.
	GatewayFetchesMax int `yaml:"gateway_fetches_max"`
	// CoordinatorConnectionsMax bounds this consumer's requests in
	// flight to one coordinator replica (host:port), so its HTTP/1.1
	// connections there: a request past it waits for one to end, its
	// request_timeout running. A coordinator refuses every client of an
	// address holding max_connections_per_address (1,000 by default)
	// with 503 overloaded — the consumer's other calls, and other
	// processes of the address: gateways' sync polls on the same host.
	// A consumer has at most a few dozen coordinator calls in flight (a
	// heartbeat, a commit of up to 500 partitions per chunk, at most 8
	// releases and 8 split commits, each with up to 2 hedged attempts
	// under replicas): the bound is a backstop that does not bind while
	// those hold. Requests to gateways are not counted (GatewayFetchesMax
	// bounds fetches). With WithHTTPClient too. Default 64.
	CoordinatorConnectionsMax int `yaml:"coordinator_connections_max"`
	// RequestTimeout bounds one request beyond its own wait (heartbeat
	// wait, fetch wait), including its retries. With several coordinator
	// URLs a heartbeat attempt gets less beyond its wait, and so does a
	// commit attempt: half of what SessionTimeout leaves after two
	// HeartbeatWaits (at least 250 ms), so a replica silent with its
	// socket open (frozen, partitioned) cannot hold it past the session
	// the replica that took over gave the member, nor hold a release
	// until the handoff gives up on it.
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// JoinTimeout bounds Join, its retries included (at least
	// RequestTimeout, which bounds each attempt): a join that failed
	// retriably — no answer, a coordinator not running, 421 with no
	// leader known, 503, 429, as while a standby takes over from a
	// failed leader — is retried with backoff until then, each attempt
	// with the first one's Idempotency-Key, so an attempt the failing
	// leader wrote but never answered is answered with the member it
	// made (no second member). A refusal no retry mends (400, 401, 403,
	// 404, 409) ends Join at once. Default 30 s: a takeover on a starved
	// machine outlasted request_timeout, and the consumer stopped.
	JoinTimeout time.Duration `yaml:"join_timeout"`
	// Raw fetches raw Kafka record batches and decodes them here (the
	// default: the gateway passes Kafka's batches through untouched)
	// instead of JSON records encoded by the gateway.
	Raw bool `yaml:"raw"`
	// FetchAhead: while records flow, start a partition's next fetch as
	// soon as the one before it names its next offset, so each partition
	// has two fetches in flight (as a Kafka consumer fetches while its
	// application polls). The session only ever sees the fetches it asked
	// for.
	FetchAhead bool `yaml:"fetch_ahead"`
	// BufferMaxBytes bounds the fetched records waiting for Poll (the
	// buffer may overshoot by one fetch per partition, two with
	// FetchAhead).
	BufferMaxBytes int64 `yaml:"buffer_max_bytes"`
	// PollMaxRecords caps the records one Poll returns (whole fetches, at
	// least one).
	PollMaxRecords int `yaml:"poll_max_records"`
	// CommitInterval: processed records are committed this often, also
	// while no record arrives (0: only Commit, revokes and Close commit).
	CommitInterval time.Duration `yaml:"commit_interval"`
	// OffsetReset is where this consumer starts a partition its group has
	// no committed offset for: "earliest" (the log's start) or "latest"
	// (its end, resolved when the partition is first fetched), as Kafka's
	// auto.offset.reset. Empty: the group's offset_reset setting (the
	// grant's offset). A committed offset always wins, and the start
	// position a reset chose is committed at the next commit, so the group
	// resumes there. It is this consumer's alone: the group's stored
	// settings do not change. Needs a coordinator that names the group's
	// policy in its grants (api.Grant.OffsetReset); an older one's grants
	// all count as committed.
	OffsetReset string `yaml:"offset_reset"`
	// ManualMarks: a record counts as processed only once passed to Mark
	// (or its offset named in Commit); Poll, Commit and Close do not mark
	// what was returned before. A revoked partition is released (its
	// marked offset committed, the next holder starting there) once
	// OnRevoke returned and the application is done with the records Poll
	// returned of it: Mark reached the last of them, or the application
	// called Poll, Commit (without offsets) or Close again after the Poll
	// that returned them — records it left unmarked are then read again
	// by the next holder, never while this one holds them. At most
	// revoke_timeout after the revoke it is released at the marked offset
	// anyway (logged as a warning).
	ManualMarks bool `yaml:"manual_marks"`
	// RevokeTimeout bounds how long a revoked partition waits for the
	// application to be done with the records Poll already returned of it
	// (the next Poll or Commit; with ManualMarks also a Mark of the last
	// of them) before its processed offset is committed anyway and the
	// partition released: the next holder then reads the records after
	// that offset again, perhaps while this consumer still processes them
	// (logged as a warning naming the partitions and offsets).
	RevokeTimeout time.Duration `yaml:"revoke_timeout"`
	// CapabilityExpiryMargin: no fetch starts, nor is retried, with a
	// capability expiring within this margin; the partition waits for the
	// renewal instead of hitting 401 (a gateway charges each expired
	// capability to the member's budget of failed verifications at its
	// address, auth_failures_per_second).
	CapabilityExpiryMargin time.Duration `yaml:"capability_expiry_margin"`
	// TLS is the CA bundle and client certificate for https:// URLs
	// (empty: the system roots, no client certificate).
	TLS tlsconf.ClientConfig `yaml:"tls"`
	// RetryBackoff and RetryBackoffMax bound the jittered exponential
	// pause between retries once every gateway has failed.
	RetryBackoff    time.Duration `yaml:"retry_backoff"`
	RetryBackoffMax time.Duration `yaml:"retry_backoff_max"`
}

// The values of Config.OffsetReset besides empty (the group's policy).
const (
	OffsetResetEarliest = session.OffsetResetEarliest
	OffsetResetLatest   = session.OffsetResetLatest
)

// DefaultConfig returns the defaults; CoordinatorURL, Gateways, Group, a
// subscription and Credential must still be set.
func DefaultConfig() Config {
	return Config{
		ClientID:                  "capgate-client",
		SessionTimeout:            10 * time.Second,
		HeartbeatWait:             3 * time.Second,
		FetchMaxBytes:             4 << 20,
		FetchMaxWait:              500 * time.Millisecond,
		GatewayFetchesMax:         1024,
		CoordinatorConnectionsMax: 64,
		RequestTimeout:            10 * time.Second,
		JoinTimeout:               30 * time.Second,
		Raw:                       true,
		FetchAhead:                true,
		CommitInterval:            5 * time.Second,
		BufferMaxBytes:            16 << 20,
		PollMaxRecords:            10000,
		RevokeTimeout:             5 * time.Second,
		CapabilityExpiryMargin:    2 * time.Second,
		RetryBackoff:              20 * time.Millisecond,
		RetryBackoffMax:           time.Second,
	}
}

// Validate checks every field and names the first bad one, as a
// *ConfigError: the Go field and its YAML key ("Config.Gateways
// (client.gateways): …"). URL lists may be comma-separated (see
// expanded).
func (c Config) Validate() error {
	listed := coordinators.Split(c.CoordinatorURL)
	if len(listed) == 0 {
		listed = []string{c.CoordinatorURL}
	}
	for _, u := range listed {
		if err := validateConfigURL("CoordinatorURL", "coordinator_url", u); err != nil {
			return err
		}
	}
	c = c.expanded()
	if _, err := coordinators.New(c.coordinatorList()); err != nil {
		return configErrorf("CoordinatorURLs", "coordinator_urls", "%v", err)
	}
	if len(c.Gateways) == 0 {
		return configErrorf("Gateways", "gateways", "must list at least one URL, got none")
	}
	for _, g := range c.Gateways {
		if err := validateConfigURL("Gateways", "gateways", g); err != nil {
			return err
		}
	}
	switch {
	case c.Group == "":
		return configErrorf("Group", "group", "must not be empty")
	case CheckGroupName(c.Group) != nil:
		return configErrorf("Group", "group", "%v", CheckGroupName(c.Group)) // refused here, not a 404 from the coordinator's router
	case (len(c.Topics) == 0) == (c.TopicPattern == ""):
		return configErrorf("Topics", "topics", "set exactly one of Topics and TopicPattern (topic_pattern), got Topics %q TopicPattern %q", c.Topics, c.TopicPattern)
	case c.Credential == "":
		return configErrorf("Credential", "credential", "must not be empty (or use WithCredentialSource)")
	}
	for _, topic := range c.Topics {
		if topic == "" {
			return configErrorf("Topics", "topics", "must not hold an empty topic, got %q", c.Topics)
		}
	}
	if c.TopicPattern != "" {
		if _, err := regexp.Compile(c.TopicPattern); err != nil {
			return configErrorf("TopicPattern", "topic_pattern", "must be a regular expression, got %q: %v", c.TopicPattern, err)
		}
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return configErrorf("TLS", "tls", "a client certificate needs its key: set both CertFile and KeyFile (cert_file, key_file) or neither, got %q and %q", c.TLS.CertFile, c.TLS.KeyFile)
	}
	if err := c.TLS.Validate("client.tls"); err != nil {
		return &ConfigError{Field: "TLS", Key: "tls", Reason: err.Error()}
	}
	return c.validateBounds()
}

func (c Config) validateBounds() error {
	switch {
	case c.SessionTimeout <= 0:
		return configErrorf("SessionTimeout", "session_timeout", "must be > 0, got %s", c.SessionTimeout)
	case c.HeartbeatWait <= 0 || c.HeartbeatWait >= c.SessionTimeout:
		return configErrorf("HeartbeatWait", "heartbeat_wait", "must be > 0 and < SessionTimeout (%s), got %s", c.SessionTimeout, c.HeartbeatWait)
	case c.FetchMaxBytes <= 0:
		return configErrorf("FetchMaxBytes", "fetch_max_bytes", "must be > 0, got %d", c.FetchMaxBytes)
	case c.FetchMaxWait < 0:
		return configErrorf("FetchMaxWait", "fetch_max_wait", "must be >= 0, got %s", c.FetchMaxWait)
	case c.FetchMaxWait > math.MaxInt32*time.Millisecond:
		// A gateway takes max_wait_ms up to Kafka's int32 (and holds at
		// most its own max_wait, 30 s by default); beyond, every fetch
		// would be refused 400.
		return configErrorf("FetchMaxWait", "fetch_max_wait", "must be <= %s (max_wait_ms is an int32), got %s", math.MaxInt32*time.Millisecond, c.FetchMaxWait)
	case c.GatewayFetchesMax <= 0:
		return configErrorf("GatewayFetchesMax", "gateway_fetches_max", "must be > 0, got %d", c.GatewayFetchesMax)
	case c.CoordinatorConnectionsMax <= 0:
		return configErrorf("CoordinatorConnectionsMax", "coordinator_connections_max", "must be > 0, got %d", c.CoordinatorConnectionsMax)
	case c.RequestTimeout <= 0:
		return configErrorf("RequestTimeout", "request_timeout", "must be > 0, got %s", c.RequestTimeout)
	case c.JoinTimeout < 0:
		return configErrorf("JoinTimeout", "join_timeout", "must be >= 0 (0: request_timeout), got %s", c.JoinTimeout)
	case c.BufferMaxBytes <= 0:
		return configErrorf("BufferMaxBytes", "buffer_max_bytes", "must be > 0, got %d", c.BufferMaxBytes)
	case c.PollMaxRecords <= 0:
		return configErrorf("PollMaxRecords", "poll_max_records", "must be > 0, got %d", c.PollMaxRecords)
	case c.RevokeTimeout <= 0:
		return configErrorf("RevokeTimeout", "revoke_timeout", "must be > 0, got %s", c.RevokeTimeout)
	case c.CommitInterval < 0:
		return configErrorf("CommitInterval", "commit_interval", "must be >= 0, got %s", c.CommitInterval)
	case c.CapabilityExpiryMargin < 0:
		return configErrorf("CapabilityExpiryMargin", "capability_expiry_margin", "must be >= 0, got %s", c.CapabilityExpiryMargin)
	case c.OffsetReset != "" && c.OffsetReset != session.OffsetResetEarliest && c.OffsetReset != session.OffsetResetLatest:
		return configErrorf("OffsetReset", "offset_reset", "must be empty (the group's), %q (OffsetResetEarliest) or %q (OffsetResetLatest), got %q", session.OffsetResetEarliest, session.OffsetResetLatest, c.OffsetReset)
	case c.RetryBackoff <= 0:
		return configErrorf("RetryBackoff", "retry_backoff", "must be > 0, got %s", c.RetryBackoff)
	case c.RetryBackoffMax < c.RetryBackoff:
		return configErrorf("RetryBackoffMax", "retry_backoff_max", "must be >= RetryBackoff (%s), got %s", c.RetryBackoff, c.RetryBackoffMax)
	}
	return nil
}

// ConfigError is a Config field Validate (and NewConsumer) refused.
type ConfigError struct {
	// Field is the Config field's Go name ("Gateways", "TLS").
	Field string
	// Key is its YAML key ("gateways", "tls").
	Key string
	// Reason says what is wrong and names the value.
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("Config.%s (client.%s): %s", e.Field, e.Key, e.Reason)
}

func configErrorf(field, key, format string, args ...any) *ConfigError {
	return &ConfigError{Field: field, Key: key, Reason: fmt.Sprintf(format, args...)}
}

// expanded is c with its URL lists split where they hold commas: capgate
// dev --replicas writes $CAPGATE_COORDINATOR_URL as "URL1,URL2,…", and
// the CLI, gateway.coordinator_url and NewGroupAPI take that form. The
// first URL of CoordinatorURL stays there and the others go before
// CoordinatorURLs; an element of CoordinatorURLs or Gateways may hold
// several URLs too. Blanks around commas are dropped (coordinators.Split);
// each URL is then checked on its own.
func (c Config) expanded() Config {
	if urls := coordinators.Split(c.CoordinatorURL); len(urls) > 0 {
		c.CoordinatorURL = urls[0]
		c.CoordinatorURLs = append(urls[1:], splitEach(c.CoordinatorURLs)...)
	} else {
		c.CoordinatorURLs = splitEach(c.CoordinatorURLs)
	}
	c.Gateways = splitEach(c.Gateways)
	return c
}

// splitEach splits every element of lists at its commas (nil stays nil).
func splitEach(lists []string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, coordinators.Split(l)...)
	}
	return out
}

// validateConfigURL checks a base URL of Config.
func validateConfigURL(field, key, raw string) error {
	if reason := urlProblem(raw); reason != "" {
		return &ConfigError{Field: field, Key: key, Reason: reason}
	}
	return nil
}

// validateURL checks a base URL named field (the producer's).
func validateURL(field, raw string) error {
	if reason := urlProblem(raw); reason != "" {
		return fmt.Errorf("%s: %s", field, reason)
	}
	return nil
}

// urlProblem says what is wrong with a base URL ("": nothing).
func urlProblem(raw string) string {
	if strings.TrimSpace(raw) == "" {
		return "must be set: an http(s) base URL, e.g. http://127.0.0.1:7070 (what capgate dev prints)"
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		if _, _, hostPort := net.SplitHostPort(raw); hostPort == nil && !strings.Contains(raw, "/") {
			// "127.0.0.1:8080", as kcat and Kafka clients take
			// addresses: the SDK does not guess the scheme (a
			// credential would go in clear to a TLS server).
			return fmt.Sprintf("must be an http(s) URL with a host, got %q: write http://%s (https://%s for a TLS server)", raw, raw, raw)
		}
		return fmt.Sprintf("must be an http(s) URL with a host, got %q", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Sprintf("must carry no query, fragment or user info, got %q", raw)
	}
	return ""
}

// coordinatorList is CoordinatorURL then CoordinatorURLs.
func (c Config) coordinatorList() []string {
	return append([]string{c.CoordinatorURL}, c.CoordinatorURLs...)
}

const redacted = "[redacted]"

// redacted returns c with the credential masked.
func (c Config) redacted() Config {
	if c.Credential != "" {
		c.Credential = redacted
	}
	return c
}

// configView has Config's fields without its methods, so printing it
// does not recurse.
type configView Config

// String prints the configuration with the credential redacted.
func (c Config) String() string { return fmt.Sprintf("%+v", configView(c.redacted())) }

// GoString keeps %#v from printing the credential.
func (c Config) GoString() string { return "client.Config" + c.String() }

// MarshalJSON keeps JSON dumps (and zap.Any) from printing the credential.
func (c Config) MarshalJSON() ([]byte, error) { return json.Marshal(configView(c.redacted())) }

// MarshalLogObject logs the configuration with the credential redacted.
func (c Config) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("coordinator_url", c.CoordinatorURL)
	enc.AddString("coordinator_urls", fmt.Sprint(c.CoordinatorURLs))
	enc.AddString("gateways", fmt.Sprint(c.Gateways))
	enc.AddString("group", c.Group)
	enc.AddString("topics", fmt.Sprint(c.Topics))
	enc.AddString("topic_pattern", c.TopicPattern)
	enc.AddString("instance_id", c.InstanceID)
	enc.AddString("client_id", c.ClientID)
	enc.AddString("credential", c.redacted().Credential)
	enc.AddDuration("session_timeout", c.SessionTimeout)
	enc.AddDuration("heartbeat_wait", c.HeartbeatWait)
	enc.AddInt32("fetch_max_bytes", c.FetchMaxBytes)
	enc.AddDuration("fetch_max_wait", c.FetchMaxWait)
	enc.AddInt("gateway_fetches_max", c.GatewayFetchesMax)
	enc.AddInt("coordinator_connections_max", c.CoordinatorConnectionsMax)
	enc.AddBool("raw", c.Raw)
	enc.AddBool("fetch_ahead", c.FetchAhead)
	enc.AddInt64("buffer_max_bytes", c.BufferMaxBytes)
	enc.AddDuration("commit_interval", c.CommitInterval)
	enc.AddBool("manual_marks", c.ManualMarks)
	enc.AddString("offset_reset", c.OffsetReset)
	return nil
}
