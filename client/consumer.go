package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/session"
	"github.com/capgate/capgate/tlsconf"
)

// Option changes a Consumer or Producer.
type Option func(*options)

type options struct {
	log      *zap.Logger
	http     *http.Client
	tls      *tlsconf.ClientConfig
	onRevoke func(context.Context, []Partition)
	onGrant  func([]Partition)
	onLost   func([]Partition)
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

// buildOptions applies opts; without WithHTTPClient the default client
// speaks TLS with files (WithTLS wins over files).
func buildOptions(opts []Option, files tlsconf.ClientConfig) (options, error) {
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
	tc, err := files.TLS(o.log)
	if err != nil {
		return o, fmt.Errorf("client: %w", err)
	}
	o.http = newHTTPClient(tc)
	return o, nil
}

// Consumer reads the partitions a group's coordinator grants it, through
// the gateways, and hands them over when asked (DESIGN §4). See the
// package documentation for the processing and commit rules.
type Consumer struct {
	cfg     Config
	opts    options
	log     *zap.Logger
	tr      *transport
	fetcher *fetcher

	ctx    context.Context // ends at Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	commitMu sync.Mutex // one user commit at a time: offsets never race backwards

	mu              sync.Mutex
	core            *session.Session
	joined          bool
	stopped         bool
	fatal           error
	leaveErr        error
	fetches         map[uint64]context.CancelFunc
	tickets         map[uint64]chan error
	lastTicket      uint64
	hooks           []hookCall
	rejoinWanted    bool
	heartbeatCancel context.CancelFunc
	armed           time.Time // the deadline the timer loop waits for

	data     chan struct{} // records may be waiting
	hookWake chan struct{}
	timeWake chan struct{}
	done     chan struct{} // closed at Stop
}

// NewConsumer validates cfg and builds an unjoined consumer.
func NewConsumer(cfg Config, opts ...Option) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.CoordinatorURL = strings.TrimRight(cfg.CoordinatorURL, "/")
	o, err := buildOptions(opts, cfg.TLS)
	if err != nil {
		return nil, err
	}
	tr := &transport{http: o.http, backoff: backoff{base: cfg.RetryBackoff, max: cfg.RetryBackoffMax}}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Consumer{
		cfg: cfg, opts: o, log: o.log.With(zap.String("group", cfg.Group)), tr: tr,
		ctx: ctx, cancel: cancel,
		core: session.New(session.Config{
			BufferMaxBytes: cfg.BufferMaxBytes,
			PollMaxRecords: cfg.PollMaxRecords,
			RevokeTimeout:  cfg.RevokeTimeout,
			ExpiryMargin:   cfg.CapabilityExpiryMargin,
			FullChecks:     o.fullChecks,
		}),
		fetches:  map[uint64]context.CancelFunc{},
		tickets:  map[uint64]chan error{},
		data:     make(chan struct{}, 1),
		hookWake: make(chan struct{}, 1),
		timeWake: make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	c.fetcher = &fetcher{cfg: cfg, tr: tr, pool: newGatewayPool(cfg.Gateways), log: c.log}
	return c, nil
}

// Join joins the group and starts consuming: the heartbeat loop and one
// fetch per granted partition run in the background until Close.
func (c *Consumer) Join(ctx context.Context) error {
	c.mu.Lock()
	if c.joined || c.stopped {
		c.mu.Unlock()
		return fmt.Errorf("client: join: already joined or closed")
	}
	c.mu.Unlock()
	resp, err := c.join(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.joined = true
	c.stepLocked(session.Joined{Now: time.Now(), Response: resp})
	c.log.Info("joined", zap.String("member", resp.MemberID), zap.Int("grants", len(resp.Grants)))
	c.spawnLocked(c.heartbeatLoop)
	c.spawnLocked(c.timerLoop)
	c.spawnLocked(c.hookLoop)
	return nil
}

// join sends POST join with the client credential, retrying transport
// errors and retriable refusals for up to request_timeout.
func (c *Consumer) join(ctx context.Context) (api.JoinResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	req := api.JoinRequest{
		InstanceID: c.cfg.InstanceID, ClientID: c.cfg.ClientID, Topics: c.cfg.Topics,
		TopicPattern: c.cfg.TopicPattern, SessionTimeoutMs: c.cfg.SessionTimeout.Milliseconds(), Assignor: c.cfg.Assignor,
	}
	var resp api.JoinResponse
	err := c.tr.retry(ctx, func(ctx context.Context) error {
		return c.tr.postJSON(ctx, "join", c.groupURL("join"), c.cfg.Credential, req, &resp)
	})
	return resp, err
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
		records := flatten(c.stepLocked(session.Polled{Now: time.Now()}))
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

// Commit marks every record returned by Poll so far as processed and
// commits the processed offsets of the partitions held (each with its
// current capability). It returns when the coordinator answered.
func (c *Consumer) Commit(ctx context.Context) error {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	c.mu.Lock()
	if err := c.usableLocked(); err != nil {
		c.mu.Unlock()
		return err
	}
	c.lastTicket++
	ticket := c.lastTicket
	result := make(chan error, 1)
	c.tickets[ticket] = result
	c.stepLocked(session.CommitRequested{Now: time.Now(), Ticket: ticket})
	c.mu.Unlock()
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.tickets, ticket)
		c.mu.Unlock()
		return ctx.Err()
	}
}

// Close revokes every partition (OnRevoke, final commit with release),
// leaves the group and stops. If ctx ends first, everything is cut short
// and ctx's error returned.
func (c *Consumer) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.joined {
		c.stepLocked(session.CloseRequested{Now: time.Now()})
	} else {
		c.stopLocked()
	}
	c.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		c.mu.Lock()
		c.stopLocked()
		c.mu.Unlock()
		return ctx.Err()
	}
	exited := make(chan struct{})
	go func() { c.wg.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fatal != nil {
		return c.fatal
	}
	return c.leaveErr
}

// Assigned lists the partitions being consumed, sorted.
func (c *Consumer) Assigned() []Partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.Assigned()
}

// MemberID is the coordinator's id for this member ("" before Join).
func (c *Consumer) MemberID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.core.Member().ID
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
func (c *Consumer) spawnLocked(fn func()) {
	if c.stopped {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
}

// stopLocked ends every background goroutine's context.
func (c *Consumer) stopLocked() {
	if c.stopped {
		return
	}
	c.stopped = true
	close(c.done)
	c.cancel()
}

// failLocked stops the consumer for good; Poll, Commit and Close return err.
func (c *Consumer) failLocked(err error) {
	c.log.Error("consumer stopped", zap.Error(err))
	c.fatal = err
	c.stopLocked()
}

func (c *Consumer) step(e session.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stepLocked(e)
}

// stepLocked steps the session and carries out its actions (none of them
// blocks); it returns the batches of a Deliver.
func (c *Consumer) stepLocked(e session.Event) []session.Batch {
	var batches []session.Batch
	for _, a := range c.core.Step(e) {
		switch a := a.(type) {
		case session.Fetch:
			c.startFetchLocked(a)
		case session.CancelFetch:
			if cancel := c.fetches[a.ID]; cancel != nil {
				cancel()
			}
		case session.Deliver:
			batches = a.Batches
		case session.Commit:
			c.startCommitLocked(a)
		case session.CommitResult:
			c.finishTicketLocked(a)
		case session.CallRevoke:
			c.queueHookLocked(hookCall{revoke: a})
		case session.CallGrant:
			c.queueHookLocked(hookCall{grant: a.Partitions})
		case session.Rejoin:
			c.log.Warn("member lost, rejoining", zap.String("member", c.core.Member().ID))
			c.rejoinWanted = true
			if c.heartbeatCancel != nil {
				c.heartbeatCancel()
			}
		case session.Leave:
			c.startLeaveLocked(a)
		case session.Stop:
			c.stopLocked()
		}
	}
	c.rearmLocked()
	return batches
}

func (c *Consumer) startFetchLocked(f session.Fetch) {
	if c.stopped {
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.fetches[f.ID] = cancel
	c.spawnLocked(func() {
		done := c.fetcher.run(ctx, f)
		cancel()
		c.mu.Lock()
		delete(c.fetches, f.ID)
		c.stepLocked(done)
		c.mu.Unlock()
		wake(c.data)
	})
}

func (c *Consumer) startCommitLocked(a session.Commit) {
	c.spawnLocked(func() {
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.RequestTimeout)
		defer cancel()
		var resp api.CommitResponse
		err := c.tr.retry(ctx, func(ctx context.Context) error {
			return c.tr.postJSON(ctx, "commit", c.groupURL("commit"), a.Token,
				api.CommitRequest{Offsets: a.Offsets, Release: a.Release}, &resp)
		})
		c.logCommit(a, err)
		c.step(session.CommitDone{Now: time.Now(), ID: a.ID, Code: codeOf(err), Err: err})
	})
}

// logCommit logs partitions and offsets, never the capabilities.
func (c *Consumer) logCommit(a session.Commit, err error) {
	fields := make([]zap.Field, 0, len(a.Offsets)+2)
	fields = append(fields, zap.Bool("release", a.Release), zap.Error(err))
	for _, o := range a.Offsets {
		fields = append(fields, zap.Int64(Partition{Topic: o.Topic, Partition: o.Partition}.String(), o.Offset))
	}
	if err != nil && a.Release {
		c.log.Warn("release commit failed; the coordinator moves the partition after its handoff timeout", fields...)
		return
	}
	c.log.Debug("committed", fields...)
}

func (c *Consumer) finishTicketLocked(r session.CommitResult) {
	result := c.tickets[r.Ticket]
	if result == nil {
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
	result <- err
}

func (c *Consumer) startLeaveLocked(a session.Leave) {
	c.spawnLocked(func() {
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.RequestTimeout)
		defer cancel()
		err := c.tr.retry(ctx, func(ctx context.Context) error {
			return c.tr.postJSON(ctx, "leave", c.groupURL("leave"), a.Token, api.LeaveRequest{}, nil)
		})
		var e *Error
		if errors.As(err, &e) && e.NeedsRejoin() {
			err = nil // already gone
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.leaveErr = err
		c.log.Info("left", zap.String("member", c.core.Member().ID), zap.Error(err))
		c.stepLocked(session.LeaveDone{Now: time.Now(), Code: codeOf(err)})
	})
}

// wake signals ch without blocking.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
