package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/client"
)

type consumeFlags struct {
	group          string
	topics         []string
	topicPattern   string
	instanceID     string
	credential     string
	credentialFile string
	token          string
	tokenFile      string
	endpoints      endpointFlags
	format         string
	maxRecords     int
	idleExit       time.Duration
	unreachable    time.Duration
	commitInterval time.Duration
	offset         string
	logLevel       string
}

// endpointFlags are the coordinator and gateway URLs shared by consume and
// produce.
type endpointFlags struct {
	coordinator string
	gateways    []string
	tls         tlsFlags
}

func (e *endpointFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&e.coordinator, "coordinator", envOr("CAPGATE_COORDINATOR_URL", "http://127.0.0.1:7070"), coordinatorHelp)
	cmd.Flags().StringSliceVar(&e.gateways, "gateways", strings.Split(envOr("CAPGATE_GATEWAY_URLS", "http://127.0.0.1:8080"), ","), "gateway base URLs, comma-separated, tried in order ($CAPGATE_GATEWAY_URLS)")
	e.tls.register(cmd.Flags())
}

func newConsumeCmd() *cobra.Command {
	f := &consumeFlags{}
	cmd := &cobra.Command{
		Use:   "consume -g GROUP -t TOPIC",
		Short: "Join a consumer group and print its records (partition, offset, key, value), committing as it goes",
		Long: "Joins GROUP at the coordinator with a client credential, fetches the granted\n" +
			"partitions through the gateways, prints one line per record and commits exactly\n" +
			"the printed records every --commit-interval (also while no record arrives). It\n" +
			"leaves the group cleanly (final commit, release) on Ctrl-C, after --max-records,\n" +
			"or after --idle-exit without records. A coordinator that is briefly unreachable\n" +
			"does not stop it (its failed heartbeats are logged every 10 s, its return at\n" +
			"info); a gateway or topic that does not exist (404), or a URL whose http:// or\n" +
			"https:// is not what the server speaks, does, with the partitions released. A\n" +
			"gateway that never answered a fetch is retried for --unreachable-exit (10 s;\n" +
			"logged every 10 s, the first line with a hint naming the flag to check), then\n" +
			"it exits 1 saying so; once a gateway answered, one that stops answering is\n" +
			"retried for as long as it runs (a blip, a restart); --idle-exit then\n" +
			"exits 1 with its error and which flag to check instead of 0 (first fetches still\n" +
			"unanswered at --idle-exit are waited for, up to request_timeout, 10 s). With no\n" +
			"partition at --idle-exit it asks the group's state: Stable with every partition\n" +
			"held by other members (more members than partitions) is idle, said on stderr,\n" +
			"exit 0; a rebalance still handing partitions out is exit 1. Fetches a gateway refuses for now (429\n" +
			"under a capgate admin qos byte rate, 503 while it is out of sync with the\n" +
			"coordinator) are retried after Retry-After and logged once, then every 10 s\n" +
			"per code with refusals_not_logged. An administrator's revoke-member makes it\n" +
			"join again, with a warning; to stop it, revoke its credential\n" +
			"(capgate admin revoke-capability JTI). On a terminal,\n" +
			"stderr shows records/s and the group's lag (the lag needs an admin token:\n" +
			"--token-file, or credentials.json as --credential-file).\n\n" +
			"--offset start|end chooses where this consumer starts the partitions its\n" +
			"group has no committed offset for, as Kafka's auto.offset.reset; committed\n" +
			"offsets always win, and the start chosen is committed like any position.\n" +
			"Without it, the group's offset_reset setting decides (earliest unless set\n" +
			"with capgate admin config GROUP --offset-reset). To move a group's\n" +
			"committed offsets, to a number or backwards: capgate admin offsets reset.\n\n" +
			"kcat's and rpk's short flags work where they mean the same: -g group, -t\n" +
			"topic, -o offset (kcat's -o beginning too), -n max records, -f format. -k is\n" +
			"not a record key: --key is the TLS client key (mTLS), as in curl.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return missingTopicHint(runConsume(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f))
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.group, "group", "g", "", "consumer group to join (required)")
	fl.StringSliceVarP(&f.topics, "topic", "t", nil, "topic(s) to subscribe to, comma-separated or repeated")
	fl.StringVar(&f.topicPattern, "topic-pattern", "", "subscribe instead to the topics whose whole name matches this regular expression (RE2, anchored as Java's subscribe(Pattern): 'orders-.*', not '^orders-'; kcat's and franz-go's match a part; one matching no topic is warned of and waits for one)")
	fl.StringVar(&f.instanceID, "instance-id", "", "static membership: a restart within the session timeout takes its partitions back")
	fl.StringVar(&f.credential, "credential", "", "client credential ($CAPGATE_CREDENTIAL); prefer --credential-file")
	fl.StringVar(&f.credentialFile, "credential-file", "", "file holding the client credential, or credentials.json (or .env) from capgate dev")
	fl.StringVar(&f.token, "token", "", "admin token for the lag display ($CAPGATE_ADMIN_TOKEN)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the admin token for the lag display, or credentials.json")
	f.endpoints.register(cmd)
	fl.StringVarP(&f.format, "format", "f", "text", "output: text (partition, offset, key, value; tab-separated), json (one object per line), or a kcat format string ('%t/%p@%o %k %s\\n': %t topic, %p partition, %o offset, %k key, %s value, %K/%S their lengths, %T timestamp ms, %h headers; bytes as they are)")
	fl.IntVarP(&f.maxRecords, "max-records", "n", 0, "exit after printing this many records (0 = no limit); exactly those are committed")
	fl.DurationVar(&f.idleExit, "idle-exit", 0, "exit after this long without a record (0 = never)")
	fl.DurationVar(&f.unreachable, "unreachable-exit", 10*time.Second, "exit 1 when no gateway has answered a fetch this long after the join, as produce gives up after request_timeout (0 = retry for ever); a consumer a gateway has answered rides out later outages")
	fl.StringVarP(&f.offset, "offset", "o", "", "where to start partitions the group has NO committed offset for: start (earliest, kcat's beginning) or end (latest); committed offsets win, as with Kafka's auto.offset.reset (default: the group's offset_reset)")
	fl.DurationVar(&f.commitInterval, "commit-interval", time.Second, "commit the printed records this often, also while idle (0 = after every batch)")
	fl.StringVar(&f.logLevel, "log-level", "warn", "log level of the SDK's logs on stderr: debug, info, warn, error")
	cmd.MarkFlagRequired("group")
	return cmd
}

func (f *consumeFlags) clientConfig() (client.Config, error) {
	cfg := client.DefaultConfig()
	if isKcatFormat(f.format) {
		if _, err := parseKcatFormat(f.format); err != nil {
			return cfg, err
		}
	} else if f.format != "text" && f.format != "json" {
		return cfg, usageErrorf("--format: want text, json or a kcat format string such as '%%t/%%p@%%o %%k %%s\n', got %q", f.format)
	}
	if f.maxRecords < 0 || f.idleExit < 0 || f.unreachable < 0 {
		return cfg, usageErrorf("--max-records, --idle-exit and --unreachable-exit: must be >= 0 (0: no limit), got %d, %s and %s", f.maxRecords, f.idleExit, f.unreachable)
	}
	switch {
	case len(f.topics) == 0 && f.topicPattern == "":
		return cfg, usageErrorf("name the subscription: --topic T or --topic-pattern REGEXP")
	case len(f.topics) > 0 && f.topicPattern != "":
		return cfg, usageErrorf("--topic and --topic-pattern: give one (--topic takes several topics, comma-separated or repeated)")
	}
	if err := groupArg(f.group); err != nil {
		return cfg, err
	}
	reset, err := offsetReset(f.offset, f.group)
	if err != nil {
		return cfg, err
	}
	if f.credential == "" && f.credentialFile == "" && os.Getenv("CAPGATE_CREDENTIAL") == "" {
		return cfg, fmt.Errorf("no client credential: pass --credential-file (credentials.json from capgate dev works), --credential or set CAPGATE_CREDENTIAL%s", devCredentialsHere("--credential-file"))
	}
	credential, err := secretFrom(f.credential, f.credentialFile, "CAPGATE_CREDENTIAL", "client_credential")
	if err != nil {
		return cfg, fmt.Errorf("client credential: %w", err)
	}
	urls, err := coordinatorURLs(f.endpoints.coordinator)
	if err != nil {
		return cfg, err
	}
	cfg.CoordinatorURL, cfg.CoordinatorURLs, cfg.Gateways = urls[0], urls[1:], f.endpoints.gateways
	cfg.Group, cfg.Topics, cfg.TopicPattern = f.group, f.topics, f.topicPattern
	cfg.InstanceID, cfg.ClientID, cfg.Credential = f.instanceID, "capgate-consume", credential
	cfg.TLS, cfg.OffsetReset = f.endpoints.tls.files(), reset
	// Only printed records count as processed: --max-records N commits N.
	cfg.ManualMarks, cfg.CommitInterval = true, f.commitInterval
	if f.commitInterval < 0 {
		return cfg, usageErrorf("--commit-interval: must be >= 0, got %s", f.commitInterval)
	}
	return cfg, inFlagWords(cfg.Validate())
}

// consumeFlagOf names the flag that sets each client.Config field consume
// takes from its flags.
var consumeFlagOf = map[string]string{
	"CoordinatorURL": "--coordinator", "CoordinatorURLs": "--coordinator", "Gateways": "--gateways",
	"Group": "--group", "Topics": "--topic", "TopicPattern": "--topic-pattern", "Credential": "--credential",
	"TLS": "--cert / --key", "OffsetReset": "--offset", "CommitInterval": "--commit-interval",
}

// inFlagWords restates a setting the SDK refused in the words of the flag
// that set it, as a usage error: the SDK's message names the Go field
// (Config.Gateways), which a CLI user never wrote.
func inFlagWords(err error) error {
	var ce *client.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	if flag, ok := consumeFlagOf[ce.Field]; ok {
		return usageErrorf("%s: %s", flag, ce.Reason)
	}
	return err
}

// offsetReset turns --offset into client.Config.OffsetReset: start
// (earliest) or end (latest), "" for the group's offset_reset. An offset
// number (rpk's -o 42, -o -3, -o +2) is refused: a group consumer resumes
// from its committed offsets, which win over any start, and a committed
// offset never moves back by a commit (409 offset_regression) — so a
// number could only ever place partitions that have no commit, all of
// them at the same offset whatever their log. Moving a group's offsets
// is the admin's explicit reset.
func offsetReset(flag, group string) (string, error) {
	switch flag {
	case "":
		return "", nil
	case "start", "earliest", "beginning": // beginning: kcat's word
		return client.OffsetResetEarliest, nil
	case "end", "latest":
		return client.OffsetResetLatest, nil
	}
	if _, err := strconv.ParseInt(strings.TrimPrefix(flag, "+"), 10, 64); err == nil {
		return "", usageErrorf("--offset %s: a group consumer takes start or end (earliest or latest: where partitions without a committed offset start; committed offsets win), not an offset number; to move the group's committed offsets, to a number or back: capgate admin offsets reset %s TOPIC [PARTITION] --to OFFSET", flag, cmp.Or(group, "GROUP"))
	}
	return "", usageErrorf("--offset %q: want start or end (or earliest, beginning, latest)", flag)
}

// adminToken is the admin token for the lag display, if there is one: the
// flags, the environment, or the admin_token of a credentials.json given
// as --credential-file.
func (f *consumeFlags) adminToken() string {
	if token, err := secretFrom(f.token, f.tokenFile, "CAPGATE_ADMIN_TOKEN", "admin_token"); err == nil {
		return token
	}
	if f.credentialFile != "" {
		if token, err := secretFrom("", f.credentialFile, "", "admin_token"); err == nil && token != credentialOf(f) {
			return token
		}
	}
	return ""
}

// credentialOf guards against a plain credential file read as the admin
// token (secretFrom returns a plain file's content for any key).
func credentialOf(f *consumeFlags) string {
	c, _ := secretFrom(f.credential, f.credentialFile, "CAPGATE_CREDENTIAL", "client_credential")
	return c
}

func runConsume(ctx context.Context, stdout, stderr io.Writer, f *consumeFlags) error {
	cfg, err := f.clientConfig()
	if err != nil {
		return err
	}
	log, err := newLogger(logConfig{Level: f.logLevel, Format: "console"})
	if err != nil {
		return usageErrorf("--log-level: %w", err)
	}
	defer log.Sync()
	sdkLog, quiet := quietableLogger(log)
	// The SDK retries a gateway that does not answer for as long as it
	// runs, warning every 10 s: its first warning says which flag to fix.
	hint := func(ctx context.Context, gateway string, err error) string {
		return endpointHintText(ctx, gatewayEndpoint, gateway, cfg.RequestTimeout, err)
	}
	c, err := client.NewConsumer(cfg, client.WithLogger(sdkLog), client.WithFetchHint(hint))
	if err != nil {
		return err
	}
	if err := c.Join(ctx); err != nil {
		c.Close(context.Background())
		// A coordinator not running, or --coordinator naming a Kafka
		// port, was "connection refused" / "reset by peer" bare; the
		// admin commands' hints say which flag fixes it (newuser5).
		return fmt.Errorf("consume: join %s: %w", cfg.Group, withoutOp(connectHint(ctx, cfg.CoordinatorURL, cfg.RequestTimeout, err), "join"))
	}
	prog := newProgress(stderr, isTerminal(stderr))
	stopProgress := prog.run(ctx, f.lagSource(cfg))
	loopErr := consumeLoop(ctx, c, f, stdout, stderr, prog, f.tenantGroupDescriber(cfg), cfg.RequestTimeout)
	stopProgress()
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.RequestTimeout+cfg.RevokeTimeout)
	defer cancel()
	quiet()
	if err := c.Close(closeCtx); err != nil && (loopErr == nil || !errors.Is(loopErr, err)) {
		log.Warn("leave", zap.Error(err))
		return errors.Join(loopErr, fmt.Errorf("consume: leave %s: %w", cfg.Group, err))
	}
	return loopErr
}

// consumeLoop prints records until ctx ends, --max-records were printed
// or --idle-exit passed without a record, marking each printed record as
// processed: the SDK commits exactly those every --commit-interval (with
// 0, the loop commits after every batch), on a revoke and on Close. A
// failed commit (the coordinator briefly unreachable; the SDK retried it
// for request_timeout) is logged and consuming goes on: the
// next commit carries the same offsets. A Poll error (a 404 from a
// gateway, a refused TLS handshake, the member refused for good) ends it.
func consumeLoop(ctx context.Context, c *client.Consumer, f *consumeFlags, stdout, stderr io.Writer, prog *progress, describe groupDescriber, requestTimeout time.Duration) error {
	w := bufio.NewWriterSize(stdout, 64<<10)
	printed := 0
	lastRecord := time.Now()
	joined := lastRecord
	var unansweredSince time.Time // idle with the first fetches still unanswered since
	for {
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if at := pollDeadline(c, f, lastRecord); !at.IsZero() {
			pollCtx, cancel = context.WithDeadline(ctx, at)
		}
		records, err := c.Poll(pollCtx)
		// Read before cancel, which ends pollCtx too: read after, every
		// Poll error under --idle-exit (a gateway's 404, a refused TLS
		// handshake) passed for idle, and came out as a failed leave,
		// printed twice (newuser6).
		idle := pollCtx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil // interrupted: Close leaves cleanly
		case err != nil && idle && neverAnswered(c, f.unreachable, joined) != nil:
			return fmt.Errorf("consume: no gateway answered a fetch in --unreachable-exit %s (%s): %w", f.unreachable, strings.Join(f.endpoints.gateways, ", "), gatewayHint(ctx, neverAnswered(c, f.unreachable, joined)))
		case err != nil && idle && (f.idleExit == 0 || time.Now().Before(lastRecord.Add(f.idleExit))):
			continue // a look at the unanswered fetches, not --idle-exit yet
		case err != nil && idle:
			if err := c.Unanswered(); err != nil {
				// Not idle: no gateway answered (the SDK retries it for as
				// long as it runs, logging it at most every 10 s).
				return fmt.Errorf("consume: no record for --idle-exit %s, and no gateway answered: %w", f.idleExit, gatewayHint(ctx, err))
			}
			if len(c.Assigned()) > 0 && !c.FetchAnswered() {
				// Not idle yet: no fetch was answered, nor has one failed
				// (a port that never answers fails it after
				// request_timeout). Wait for its outcome, in short polls
				// so that records or the first answer end the wait.
				if unansweredSince.IsZero() {
					unansweredSince = time.Now()
				}
				if wait := requestTimeout + time.Second; time.Since(unansweredSince) < wait {
					lastRecord = time.Now().Add(unansweredPoll - f.idleExit)
					continue
				}
				return fmt.Errorf("consume: no record for --idle-exit %s, and no gateway answered a fetch (%s)", f.idleExit, strings.Join(f.endpoints.gateways, ", "))
			}
			if len(c.Assigned()) == 0 {
				// Idle only if no partition is on its way.
				return idleWithoutPartitions(ctx, f.idleExit, f.group, c.MemberID(), describe, stderr)
			}
			return nil // idle
		case err != nil:
			return fmt.Errorf("consume: %w", err)
		}
		lastRecord = time.Now()
		if f.maxRecords > 0 && printed+len(records) > f.maxRecords {
			records = records[:f.maxRecords-printed]
		}
		if err := prog.records(len(records), func() error { return writeRecords(w, records, f.format) }); err != nil {
			return fmt.Errorf("consume: write: %w", err)
		}
		c.Mark(records...)
		printed += len(records)
		if f.maxRecords > 0 && printed >= f.maxRecords {
			return nil
		}
		if f.commitInterval == 0 {
			// In the background: a commit waiting for a coordinator (one
			// failing over) must not stop the printing. The SDK logs a
			// failure; the next commit carries these offsets.
			c.CommitAsync()
		}
	}
}

// unansweredPoll is how often consume --idle-exit looks again whether
// its first fetches were answered (consumeLoop), and how often a
// consumer no gateway has answered yet checks --unreachable-exit.
const unansweredPoll = 250 * time.Millisecond

// pollDeadline is when consumeLoop's next Poll stops waiting: at
// --idle-exit after the last record, and — while no gateway has answered
// a fetch and --unreachable-exit is set — every unansweredPoll, to give
// up on gateways that never answered (zero: no deadline).
func pollDeadline(c *client.Consumer, f *consumeFlags, lastRecord time.Time) time.Time {
	var at time.Time
	if f.idleExit > 0 {
		at = lastRecord.Add(f.idleExit)
	}
	if f.unreachable > 0 && !c.FetchAnswered() {
		if check := time.Now().Add(unansweredPoll); at.IsZero() || check.Before(at) {
			at = check
		}
	}
	return at
}

// neverAnswered is the last unanswered fetch's error when no gateway has
// answered any fetch of this consumer and unreachable has passed since
// the join: produce gives up on gateways after request_timeout, and a
// consume whose --gateways name nothing that answers retried for ever,
// silent but for a warning every 10 s. A consumer a gateway has answered
// (if only to refuse) rides out later outages (nil), as does one with no
// partition to fetch.
func neverAnswered(c *client.Consumer, unreachable time.Duration, joined time.Time) error {
	if unreachable == 0 || c.FetchAnswered() || time.Since(joined) < unreachable {
		return nil
	}
	return c.Unanswered()
}

func writeRecords(w *bufio.Writer, records []client.Record, format string) error {
	write := writeTextRecord
	switch {
	case format == "json":
		write = writeJSONRecord
	case isKcatFormat(format):
		kf, err := parseKcatFormat(format) // checked by clientConfig
		if err != nil {
			return err
		}
		write = func(w *bufio.Writer, r *client.Record) error { return kf.write(w, r) }
	}
	for i := range records {
		if err := write(w, &records[i]); err != nil {
			return err
		}
	}
	return w.Flush()
}

// quietableLogger wraps log with a level that quiet raises to error.
//
// WORKAROUND (reported): while a consumer leaves, the SDK logs the
// coordinator's unknown_member answer to its own held heartbeat as a
// "heartbeat failed" warning. Close's error still reports a failed leave.
func quietableLogger(log *zap.Logger) (*zap.Logger, func()) {
	level := zap.NewAtomicLevelAt(zapcore.LevelOf(log.Core()))
	return log.WithOptions(zap.IncreaseLevel(level)), func() { level.SetLevel(zapcore.ErrorLevel) }
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
