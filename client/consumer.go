package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/client/session"
	"github.com/capgate/capgate/tlsconf"
)

// Option changes a Consumer or Producer.
type Option func(*options)

type options struct {
	log     *zap.Logger
	http    *http.Client
	ownHTTP bool // http was built here: Close closes its connections
	tls     *tlsconf.ClientConfig
	// files and tc are the TLS settings of an own http, as given and
	// loaded (a FetchPool's clients are shared by files).
	files tlsconf.ClientConfig
	tc    *tlsconf.Client
	// fetchPool is WithFetchPool's pool (nil: defaultFetchPool).
	fetchPool *FetchPool
	onRevoke  func(context.Context, []Partition)
	onGrant   func([]Partition)
	onLost    func([]Partition)
	// credentials is WithCredentialSource's function (nil: Config.Credential).
	credentials func(context.Context) (string, error)
	// fetchHint is WithFetchHint's function (nil: defaultFetchHint).
	fetchHint func(ctx context.Context, gatewayURL string, err error) string
	// fullChecks asserts the session's buffer invariants on every step
	// (tests).
	fullChecks bool
}

// WithLogger logs through log (default: no logging). Tokens and the
// credential are never logged.
func WithLogger(log *zap.Logger) Option { return func(o *options) { o.log = log } }

// WithHTTPClient sends every request through hc (default: a keep-alive
// client sized for one long poll per partition).
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.http = hc } }

// WithTLS sets the CA bundle and client certificate of https:// URLs
// (the producer's way; a consumer may use Config.TLS instead). Ignored
// with WithHTTPClient.
func WithTLS(files tlsconf.ClientConfig) Option { return func(o *options) { o.tls = &files } }

// OnRevoke sets the hook called when partitions are taken away (a
// coordinator revoke, a gateway 409, or Close), after their last record
// was handed out and before their processed offset is committed and they
// are released. ctx ends after revoke_timeout. Finish (and Commit, if you
// like) the records of these partitions before returning.
func OnRevoke(fn func(ctx context.Context, revoked []Partition)) Option {
	return func(o *options) { o.onRevoke = fn }
}

// OnGrant sets the hook called when partitions are granted. Fetching has
// already started; a partition re-granted under a new epoch is announced
// again.
func OnGrant(fn func(granted []Partition)) Option { return func(o *options) { o.onGrant = fn } }

// OnLost sets the hook called when partitions are lost without a commit
// (the member's session expired; the consumer rejoins). Without it,
// OnRevoke is called with a cancelled context instead.
func OnLost(fn func(lost []Partition)) Option { return func(o *options) { o.onLost = fn } }

// WithCredentialSource makes every join ask fn for the client
// credential (or IdP token) to present, instead of using
// Config.Credential (which may then be empty): a consumer keeps reading
// across credential renewals. A member token never outlives the
// credential it was joined with, so before it expires (revoke_timeout +
// 2 × request_timeout before, at most half its life) the consumer renews
// its member. In place — same member, partitions and epochs, nothing in
// the group moves — when fn's credential is still the member's: the
// same one, an IdP token of the same subject, another token of the same
// OAuth client, or another admin-minted credential of the same name (the
// consumer presents the one the member is bound to beside it). Else
// every partition is revoked and released as in a rebalance (OnRevoke,
// the processed offsets committed), the member leaves, and a join with
// fn's current credential makes a new member (same instance_id) that
// takes partitions back under fresh epochs — nothing is lost or
// delivered twice. fn runs without the consumer's lock, on
// the join's context; an error is retried like an unanswered join.
// Without a source the consumer renews with Config.Credential, which
// helps only while that credential outlives member_token_ttl; once it
// expires the join is refused (401 token_expired) and the consumer stops
// with that error.
func WithCredentialSource(fn func(ctx context.Context) (string, error)) Option {
	return func(o *options) { o.credentials = fn }
}

// WithFetchHint: hint says what to do about a fetch gateway gatewayURL
// did not answer (a refused connection, a timeout, a connection closed
// without an HTTP answer) — which setting names a wrong address, say; ""
// adds nothing. Its text goes, as "hint", with the first "fetch failed:
// the gateway did not answer" warning of each outage of a gateway only:
// the later ones (at most one per 10 s while it fails) repeat the error,
// not the hint, and a gateway that answers again (if only to refuse) and
// fails later has its new outage's first warning hinted again. hint runs
// in the failed fetch's goroutine before that fetch's retry, at most once
// per outage; ctx ends when the consumer stops. A refusal (an HTTP
// answer) is never hinted. Without it the SDK's own hint names what the
// common errors of a wrong Config.Gateways URL mean (nothing listening,
// host not found, a Kafka port or TLS server closing the request, no
// answer).
func WithFetchHint(hint func(ctx context.Context, gatewayURL string, err error) string) Option {
	return func(o *options) { o.fetchHint = hint }
}

// buildOptions applies opts; without WithHTTPClient the default client
// speaks TLS with files (WithTLS wins over files) and keeps idlePerHost
// connections per host (newHTTPClient).
func buildOptions(opts []Option, files tlsconf.ClientConfig, idlePerHost int) (options, error) {
	o := options{log: zap.NewNop()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.http != nil {
		return o, nil
	}
	if o.tls != nil {
		files = *o.tls
	}
	tc, err := files.Client(o.log)
	if err != nil {
		return o, fmt.Errorf("client: %w", err)
	}
	o.http, o.ownHTTP, o.files, o.tc = newHTTPClient(tc, idlePerHost), true, files, tc
	return o, nil
}

// Consumer reads the partitions a group's coordinator grants it, through
// the gateways, and hands them over when asked (DESIGN §4). See the
// package documentation for the processing and commit rules.
//
// Every decision is client/driver's (around the client/session core);
// the Consumer carries out its commands: one goroutine per request
// attempt, a timer at the driver's next deadline, and the user's hooks
// run one at a time in order.
type Consumer struct {
	cfg     Config
	opts    options
	log     *zap.Logger
	tr      *transport
	fetcher *fetcher
	letGo   func() // gives back the fetch pool's connections (fetchThrough)
	// exit is closed once the stopped consumer's goroutines ended
	// (exited).
	exit     chan struct{}
	exitOnce sync.Once

	unanswered   unanswered   // fetches no gateway answered (unanswered.go)
	beatFailures beatFailures // heartbeats that failed (beatlog.go)
	refusals     refusalLog   // retriable fetch refusals, by code (refusallog.go)

	ctx    context.Context // ends at Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	commitMu sync.Mutex // one user commit at a time: offsets never race backwards

	// bound is the credential the member was last joined or renewed
	// with (a successful join's bearer): a renewal presenting another
	// credential sends it as renew_credential (boundCredential).
	bound atomic.Pointer[string]

	mu         sync.Mutex
	d          *driver.Driver
	joined     bool
	started    bool // the timer and hook loops run
	stopped    bool
	fatal      error
	leaveErr   error
	joinResult chan driver.JoinResult
	calls      map[uint64]call // request attempts in flight
	tickets    map[uint64]commitTicket
	lastTicket uint64
	merged     *CommitFuture // the future the request being stepped was merged into
	hooks      []hookCall
	armed      time.Time // the deadline the timer loop waits for

	inbox answerInbox // answers waiting to be stepped (answered)

	data     chan struct{} // records may be waiting
	hookWake chan struct{}
	timeWake chan struct{}
	done     chan struct{} // closed at Stop
}

// NewConsumer validates cfg and builds an unjoined consumer. URL lists
// may be comma-separated, as capgate dev --replicas writes
// $CAPGATE_COORDINATOR_URL (Config.CoordinatorURL).
func NewConsumer(cfg Config, opts ...Option) (*Consumer, error) {
	if err := credentialed(cfg, opts).Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.expanded()
	cfg.CoordinatorURL = strings.TrimRight(cfg.CoordinatorURL, "/")
	o, err := buildOptions(opts, cfg.TLS, 0) // fetches go on the pool's connections
	if err != nil {
		return nil, err
	}
	if o.ownHTTP { // only coordinator calls use it (coordbound.go)
		o.http.Transport.(*http.Transport).MaxConnsPerHost = cfg.CoordinatorConnectionsMax
	}
	hc, err := WithCoordinators(boundCoordinators(o.http, cfg.coordinatorList(), cfg.CoordinatorConnectionsMax), cfg.coordinatorList()) // follows not_leader (leader.go)
	if err != nil {
		return nil, err
	}
	tr := &transport{http: hc, backoff: backoff{base: cfg.RetryBackoff, max: cfg.RetryBackoffMax}}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Consumer{
		cfg: cfg, opts: o, log: o.log.With(zap.String("group", cfg.Group)), tr: tr,
		ctx: ctx, cancel: cancel,
		d:          driver.New(driverConfig(cfg, o)),
		joinResult: make(chan driver.JoinResult, 1),
		calls:      map[uint64]call{},
		tickets:    map[uint64]commitTicket{},
		data:       make(chan struct{}, 1),
		hookWake:   make(chan struct{}, 1),
		timeWake:   make(chan struct{}, 1),
		done:       make(chan struct{}),
	}
	c.fetcher, c.letGo = fetchThrough(ctx, cfg, o, tr)
	return c, nil
}

// fetchThrough builds the consumer's fetcher: its fetches take slots of
// the pool's (o.fetchPool, or the process's default), and go on the
// pool's shared connections unless the user gave an HTTP client (then
// on tr, that client). letGo gives the shared connections back (Close,
// once no fetch runs).
func fetchThrough(ctx context.Context, cfg Config, o options, tr *transport) (f *fetcher, letGo func()) {
	pool := o.fetchPool
	if pool == nil {
		pool = defaultFetchPool
	}
	urls := trimURLs(cfg.Gateways)
	trs := make([]*transport, len(urls))
	for i, u := range urls {
		trs[i] = tr
		if o.ownHTTP {
			trs[i] = &transport{http: pool.client(u, o.files, o.tc), backoff: tr.backoff}
		}
	}
	var once sync.Once
	letGo = func() {
		once.Do(func() {
			if o.ownHTTP {
				for _, u := range urls {
					pool.letGo(u, o.files)
				}
			}
		})
	}
	return newFetcher(ctx, cfg, pool, trs, urls), letGo
}

// credentialed is cfg as validated: with a credential source set, an
// empty Credential stands for the source's.
func credentialed(cfg Config, opts []Option) Config {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.credentials != nil && cfg.Credential == "" {
		cfg.Credential = redacted
	}
	return cfg
}

func driverConfig(cfg Config, o options) driver.Config {
	return driver.Config{
		Join: api.JoinRequest{
			InstanceID: cfg.InstanceID, ClientID: cfg.ClientID, Topics: cfg.Topics,
			TopicPattern: cfg.TopicPattern, SessionTimeoutMs: cfg.SessionTimeout.Milliseconds(), Assignor: cfg.Assignor,
		},
		Gateways: len(cfg.Gateways), HeartbeatWait: cfg.HeartbeatWait, FetchMaxWait: cfg.FetchMaxWait,
		RequestTimeout: cfg.RequestTimeout, JoinTimeout: cfg.JoinTimeout, Replicas: len(cfg.coordinatorList()) > 1, RetryBackoff: cfg.RetryBackoff, RetryBackoffMax: cfg.RetryBackoffMax,
		MemberRenew: cfg.RevokeTimeout + 2*cfg.RequestTimeout,
		Session: session.Config{
			BufferMaxBytes: cfg.BufferMaxBytes, FetchMaxBytes: cfg.FetchMaxBytes,
			PollMaxRecords: cfg.PollMaxRecords,
			RevokeTimeout:  cfg.RevokeTimeout,
			ExpiryMargin:   cfg.CapabilityExpiryMargin,
			ManualMarks:    cfg.ManualMarks,
			CommitInterval: cfg.CommitInterval,
			OffsetReset:    cfg.OffsetReset,
			FullChecks:     o.fullChecks,
		},
		Rand: rand.Int64N,
	}
}

// Join joins the group and starts consuming: heartbeats and one fetch per
// granted partition run in the background until Close. The join is
// retried (transport errors, retriable refusals: a failover under way)
// with backoff for up to join_timeout, each attempt within
// request_timeout; a refusal no retry mends (400, 401, 403) ends it at
// once; ctx ending first gives it up (ctx's error). A
// consumer joins once: Join after a successful one fails with
// ErrAlreadyJoined, after Close with ErrClosed (errors.Is); after a
// failed one it tries again.
func (c *Consumer) Join(ctx context.Context) error {
	c.mu.Lock()
	switch {
	case c.stopped:
		c.mu.Unlock()
		return fmt.Errorf("client: join: %w", ErrClosed)
	case c.joined:
		c.mu.Unlock()
		return fmt.Errorf("client: join: %w", ErrAlreadyJoined)
	}
	if !c.started {
		c.started = true
		c.spawnLocked(c.timerLoop)
		c.spawnLocked(c.hookLoop)
	}
	c.carry(c.d.Start(time.Now()))
	c.mu.Unlock()
	var r driver.JoinResult
	select {
	case r = <-c.joinResult:
	case <-ctx.Done():
		c.mu.Lock()
		c.carry(c.d.CancelJoin(time.Now(), ctx.Err()))
		c.mu.Unlock()
		r = <-c.joinResult
	}
	if r.Err != nil {
		return r.Err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.joined = true
	c.log.Info("joined", zap.String("member", r.Response.MemberID), zap.Int("grants", len(r.Response.Grants)))
	if n := r.Response.TopicPatternMatches; n != nil && *n == 0 {
		c.log.Warn(NoTopicMatches(c.cfg.TopicPattern), zap.String("topic_pattern", c.cfg.TopicPattern))
	}
	return nil
}

// NoTopicMatches is the warning of a join whose topic pattern matched no
// topic (api.JoinResponse.TopicPatternMatches 0): the member waits with
// no partition, which was silent — and a pattern meant as a prefix
// ('^orders-', as kcat and franz-go match a part) is the likely cause.
// The Kafka listener and capgate admin group say the same.
func NoTopicMatches(pattern string) string {
	msg := "topic pattern matches no topic: this member holds no partition until a topic whose whole name matches is created"
	if prefix, ok := strings.CutPrefix(pattern, "^"); ok && prefix != "" && regexp.QuoteMeta(prefix) == prefix {
		msg += "; the pattern must match the whole name (anchored, as Java's subscribe(Pattern)): for topics starting " + strconv.Quote(prefix) + " use " + strconv.Quote(prefix+".*")
	} else {
		msg += " (the pattern must match the whole name, anchored as Java's subscribe(Pattern))"
	}
	return msg
}

func (c *Consumer) groupURL(action string) string {
	return c.cfg.CoordinatorURL + "/v1/groups/" + url.PathEscape(c.cfg.Group) + "/" + action
}

// Poll returns the next fetched records, waiting until some arrive or ctx
// ends. Calling Poll also marks every record returned by the previous
// Poll as processed: its offset may be committed and, on a revoke, the
// partition is handed over right after it. Poll is meant for one
// goroutine.
func (c *Consumer) Poll(ctx context.Context) ([]Record, error) {
	for {
		c.mu.Lock()
		if err := c.usableLocked(); err != nil {
			c.mu.Unlock()
			return nil, err
		}
		records := flatten(c.carry(c.d.User(session.Polled{Now: time.Now()})))
		c.mu.Unlock()
		if len(records) > 0 {
			return records, nil
		}
		select {
		case <-c.data:
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Mark marks records as processed: the offset after each becomes its
// partition's processed offset, committed by the next Commit, timed
// commit, revoke or Close. Marks of partitions no longer held (or held
// under another epoch) are ignored. With Config.ManualMarks only marked
// records count as processed; without it, the next Poll marks everything
// returned before anyway.
func (c *Consumer) Mark(records ...Record) {
	if len(records) == 0 {
		return
	}
	marks := make([]session.Mark, 0, 1)
	for i := range records {
		m := MarkAfter(&records[i])
		if n := len(marks); n > 0 && marks[n-1].Partition == m.Partition && marks[n-1].Epoch == m.Epoch {
			marks[n-1].Offset = max(marks[n-1].Offset, m.Offset)
			continue
		}
		marks = append(marks, m)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.usableLocked() != nil {
		return
	}
	c.carry(c.d.User(session.Marked{Now: time.Now(), Marks: marks}))
}

// Offset names the offset to commit for one partition at the epoch its
// records were read under (Record.Epoch): the offset after the last
// record processed.
type Offset = session.Mark

// MarkAfter is the Offset that counts r and everything before it in its
// partition as processed.
func MarkAfter(r *Record) Offset {
	return Offset{Partition: Partition{Topic: r.Topic, Partition: r.Partition}, Epoch: r.Epoch, Offset: r.Offset + 1}
}

// Commit commits processed offsets and returns when the coordinator
// answered (or the retries of a coordinator blip ran out after
// request_timeout; the timed commits carry the offsets again later).
// Commits go one at a time: one made while another is in flight (a
// timed or background one) is sent when that one ended. Without
// offsets it commits the processed offset of every held partition that
// moved — having first marked every record returned by Poll so far as
// processed, unless Config.ManualMarks. With offsets it commits exactly
// those (see MarkAfter): each must name a held partition at its epoch and
// an offset between the committed one and the records delivered, or
// nothing is committed and the error says which is wrong. A partition
// whose capability is about to expire is committed all the same (the
// coordinator decides); a refusal is returned, never dropped.
//
// Commit waits for the coordinator: while none answers (a coordinator
// replica failing over, ~1.5 s) a poll loop that calls it delivers
// nothing although the gateways keep serving. A loop that commits often
// should use CommitAsync.
func (c *Consumer) Commit(ctx context.Context, offsets ...Offset) error {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	f, ticket := c.requestCommit(offsets, false)
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.tickets, ticket)
		c.mu.Unlock()
		return ctx.Err()
	}
}

// CommitAsync commits like Commit but returns at once: the commit goes
// in the background, and the CommitFuture reports its outcome — nil once
// the coordinator accepted offsets at or beyond those asked for, else the
// refusal, or the transport error after request_timeout (also logged, so
// a future nobody reads loses nothing). Poll goes on delivering
// meanwhile, also while no coordinator answers.
//
// Commits go one at a time. While one is in flight, CommitAsync requests
// are merged into the next commit, and share its CommitFuture: it
// carries the latest processed offset of every partition any of them
// named (every partition that moved, for a request naming none). So
// calling it after every Poll costs one commit in flight and one waiting,
// however long the coordinator takes. Named offsets are checked as
// Commit checks them (a bad one gets its own failed future, nothing
// sent) and, unlike Commit's, only ever move a processed offset forward,
// as Mark does. A request still waiting when the consumer closes or
// loses its partitions fails (it was never sent: the release, or
// nothing, commits them then).
//
// Releases on revoke and Close stay synchronous: a partition is handed
// over only after the coordinator accepted its last offset.
func (c *Consumer) CommitAsync(offsets ...Offset) *CommitFuture {
	f, _ := c.requestCommit(offsets, true)
	return f
}

// CommitFuture is the outcome of a commit, answered once.
type CommitFuture struct {
	done chan struct{}
	err  error
}

// Done is closed once the outcome is known.
func (f *CommitFuture) Done() <-chan struct{} { return f.done }

// Err is the outcome once Done is closed (nil: committed), and nil
// before.
func (f *CommitFuture) Err() error {
	select {
	case <-f.done:
		return f.err
	default:
		return nil
	}
}

// Wait returns the outcome, or ctx's error if ctx ends first (the
// commit goes on).
func (f *CommitFuture) Wait(ctx context.Context) error {
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *CommitFuture) answer(err error) {
	f.err = err
	close(f.done)
}

// requestCommit steps a commit request and returns the future that will
// carry its outcome (the one it was merged into, if it was).
func (c *Consumer) requestCommit(offsets []Offset, async bool) (*CommitFuture, uint64) {
	f := &CommitFuture{done: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usableLocked(); err != nil {
		f.answer(err)
		return f, 0
	}
	c.lastTicket++
	ticket := c.lastTicket
	c.tickets[ticket] = commitTicket{future: f, async: async}
	c.carry(c.d.User(session.CommitRequested{Now: time.Now(), Ticket: ticket, Offsets: offsets, Async: async}))
	if into := c.merged; into != nil {
		c.merged = nil
		return into, ticket
	}
	return f, ticket
}

// Assigned lists the partitions being consumed, sorted.
func (c *Consumer) Assigned() []Partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.Session().Assigned()
}

// MemberID is the coordinator's id for this member ("" before Join).
func (c *Consumer) MemberID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.Session().Member().ID
}

func (c *Consumer) usableLocked() error {
	switch {
	case c.fatal != nil:
		return c.fatal
	case c.stopped:
		return ErrClosed
	case !c.joined:
		return ErrNotJoined
	}
	return nil
}

// spawnLocked runs fn in a goroutine unless the consumer stopped.
func (c *Consumer) spawnLocked(fn func()) bool {
	if c.stopped {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

// stopLocked ends every background goroutine's context.
func (c *Consumer) stopLocked() {
	if c.stopped {
		return
	}
	c.stopped = true
	close(c.done)
	c.cancel()
	c.answerTicketsLocked()
}

// failLocked stops the consumer for good; Poll, Commit and Close return
// err. It is the caller's to report: logged here at info only, so a CLI
// printing the error it got does not show it twice more (error, warn).
func (c *Consumer) failLocked(err error) {
	c.log.Info("consumer stopped", zap.Error(err))
	c.fatal = err
	c.stopLocked()
}

// step steps a session event of the user (a hook returned) under the lock.
func (c *Consumer) step(e session.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.carry(c.d.User(e))
}

// carry carries out the driver's commands (none of them blocks) and
// returns the batches of a Deliver.
func (c *Consumer) carry(cmds []driver.Command) []session.Batch {
	var batches []session.Batch
	var stops []session.Partition
	defer func() { c.fetcher.stop(stops...) }() // before any hook queued here runs: it needs the lock
	for _, cmd := range cmds {
		switch cmd := cmd.(type) {
		case driver.Send:
			c.startLocked(cmd)
		case driver.Cancel:
			if call, ok := c.calls[cmd.Call]; ok {
				call.cancel()
				if call.fetch {
					// An aborted fetch also stops what is fetched
					// ahead of its partition.
					stops = append(stops, call.partition)
				}
			}
		case session.Deliver:
			batches = append(batches, cmd.Batches...)
		case session.CommitResult:
			c.finishTicketLocked(cmd)
		case session.CommitMerged:
			if into, ok := c.tickets[cmd.Into]; ok { // always: Into waits in the session
				delete(c.tickets, cmd.Ticket)
				c.merged = into.future
			}
		case session.CallRevoke:
			c.queueHookLocked(hookCall{revoke: cmd})
		case session.CallGrant:
			c.queueHookLocked(hookCall{grant: cmd.Partitions})
		case session.RevokeTimedOut:
			c.logRevokeTimedOut(cmd)
		case driver.JoinRetrying:
			c.log.Warn("join failed; retrying until join_timeout", zap.Error(cmd.Err),
				zap.Duration("until_join_timeout", time.Until(cmd.Until).Round(time.Second)))
		case driver.JoinResult:
			c.joinResult <- cmd
		case driver.LeaveResult:
			c.leaveErr = cmd.Err
			c.log.Info("left", zap.String("member", c.d.Session().Member().ID), zap.Error(cmd.Err))
		case driver.MemberRemoved:
			c.logRemoved(cmd)
		case driver.Failed:
			c.failLocked(cmd.Err)
		case driver.Aborted:
			// Poll and Commit report it from now on (the caller's to
			// report: info here, see failLocked); the session releases
			// what it holds and leaves, then stops.
			c.log.Info("consumer stopping: releasing its partitions", zap.Error(cmd.Err))
			c.fatal = cmd.Err
			wake(c.data)
		case session.Stop:
			c.stopLocked()
		}
	}
	c.rearmLocked()
	return batches
}

// startLocked runs one request attempt in its own goroutine and steps
// its answer.
func (c *Consumer) startLocked(s driver.Send) {
	var ctx context.Context
	var cancel context.CancelFunc
	if s.Kind == driver.KindFetch {
		// The fetcher times the fetch from when it has a slot of its
		// gateway (GatewayFetchesMax): waiting for one is no gateway's
		// silence.
		ctx, cancel = context.WithCancel(c.ctx)
		c.calls[s.Call] = call{cancel: cancel, fetch: true, partition: s.Fetch.Partition}
	} else {
		ctx, cancel = context.WithTimeout(c.ctx, s.Timeout)
		c.calls[s.Call] = call{cancel: cancel}
	}
	if !c.spawnLocked(func() {
		answer := c.attempt(ctx, s)
		cancel()
		c.answered(answer, s.Kind == driver.KindFetch)
	}) {
		cancel()
		delete(c.calls, s.Call)
	}
}

// call is a request attempt in flight: cancel aborts it; a fetch's
// abort also stops what is fetched ahead of its partition (carry), before
// a revoke hook can run.
type call struct {
	cancel    context.CancelFunc
	fetch     bool
	partition session.Partition
}

// commitTicket is a commit request waiting for its outcome.
type commitTicket struct {
	future *CommitFuture
	async  bool
}

func (c *Consumer) finishTicketLocked(r session.CommitResult) {
	t, ok := c.tickets[r.Ticket]
	if !ok {
		return
	}
	delete(c.tickets, r.Ticket)
	var err error
	switch {
	case r.Err != nil:
		err = r.Err
	case r.Code != "":
		err = &Error{Op: "commit", Code: r.Code, Status: r.Code.Status()}
	}
	var e *Error
	if err != nil && r.Code != "" && !errors.As(err, &e) {
		err = &Error{Op: "commit", Code: r.Code, Status: r.Code.Status(), Message: err.Error()}
	}
	if err != nil && t.async {
		c.log.Warn("background commit failed", zap.Error(err))
	}
	t.future.answer(err)
}

// answerTicketsLocked answers every commit still waiting: the consumer
// stopped, nothing more will be sent or answered.
func (c *Consumer) answerTicketsLocked() {
	err := c.fatal
	if err == nil {
		err = ErrClosed
	}
	for ticket, t := range c.tickets {
		delete(c.tickets, ticket)
		t.future.answer(err)
	}
}

// wake signals ch without blocking.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
