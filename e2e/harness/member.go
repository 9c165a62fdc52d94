package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

// MemberOptions configure a consumer, in this process (StartMember) or as
// a process (StartConsumerProcess).
type MemberOptions struct {
	// Name labels the consumer in the log and in failures.
	Name  string
	Group string
	// SessionTimeout defaults to the cluster's Timing.SessionTimeout.
	SessionTimeout time.Duration
	// CommitInterval: commit at most this often (default 100ms; < 0:
	// never, revoked partitions are still released with a commit).
	CommitInterval time.Duration
	// SyncCommit commits with the synchronous Consumer.Commit, which holds
	// the poll loop up until a coordinator answers (default: CommitAsync,
	// stack.Consumer's; BenchmarkFailover measures both).
	SyncCommit bool
	// InstanceID makes the membership static.
	InstanceID string
	// Gateways overrides the cluster's gateway URLs.
	Gateways []string
	// PrintSecrets puts capabilities and member tokens into the lines.
	PrintSecrets bool
	// RequestTimeout overrides the stack's request_timeout (5 s; the
	// SDK's default is 10 s).
	RequestTimeout time.Duration
	// FirstReplica is the coordinator replica the SDK asks first
	// (default: the cluster's first).
	FirstReplica *Coordinator
	// Credential is the client credential the consumer joins with
	// (default: one the cluster mints for Group, ClientCredential; a
	// TopicPattern needs one for any topic, "*").
	Credential string
	// TopicPattern subscribes by pattern instead of the cluster's topic
	// (in-process members only).
	TopicPattern string
}

// ConsumerConfig is the configuration a consumer with opts runs with.
func (c *Cluster) ConsumerConfig(t testing.TB, opts MemberOptions) ConsumerConfig {
	t.Helper()
	cred := opts.Credential
	if cred == "" {
		cred = c.ClientCredential(t, opts.Group)
	}
	cc := c.ClientConfig(opts.Group, []string{c.opts.Topic}, cred)
	if len(opts.Gateways) > 0 {
		cc.Gateways = opts.Gateways
	}
	cc.ClientID, cc.InstanceID = "harness", opts.InstanceID
	if opts.TopicPattern != "" {
		cc.Topics, cc.TopicPattern = nil, opts.TopicPattern
	}
	if len(c.Replicas) > 1 {
		// Every replica, the first (or FirstReplica) first: the SDK
		// follows not_leader.
		first := c.Replicas[0]
		if opts.FirstReplica != nil {
			first = opts.FirstReplica
		}
		cc.CoordinatorURL, cc.CoordinatorURLs = first.URL, nil
		for _, co := range c.Replicas {
			if co != first {
				cc.CoordinatorURLs = append(cc.CoordinatorURLs, co.URL)
			}
		}
	}
	if opts.RequestTimeout > 0 {
		cc.RequestTimeout = opts.RequestTimeout
	}
	if opts.SessionTimeout > 0 {
		cc.SessionTimeout = opts.SessionTimeout
		cc.HeartbeatWait = min(c.opts.Timing.HeartbeatWait, cc.SessionTimeout/2)
	}
	cfg := ConsumerConfig{Client: cc, CommitInterval: 100 * time.Millisecond, CloseTimeout: 10 * time.Second, PrintSecrets: opts.PrintSecrets, SyncCommit: opts.SyncCommit}
	switch {
	case opts.CommitInterval > 0:
		cfg.CommitInterval = opts.CommitInterval
	case opts.CommitInterval < 0:
		cfg.CommitInterval = 0
	}
	return cfg
}

// Member is a consumer running in this process with RunConsumer: its
// lines go straight to the log. Kill cuts its network and stops it without
// leaving; Hold keeps calls of one kind from being sent. Safe for
// concurrent use.
type Member struct {
	Name     string
	Recorder *Recorder
	log      *Log
	cancel   context.CancelFunc
	done     chan struct{}

	mu     sync.Mutex
	err    error
	member string
	killed bool
	joined chan struct{}
	caps   map[int32]string // last capability per partition (PrintSecrets)
}

// StartMember starts an in-process consumer and waits until it joined.
func (c *Cluster) StartMember(t testing.TB, opts MemberOptions) *Member {
	t.Helper()
	m := c.startMember(t, opts)
	m.WaitJoined(t)
	return m
}

// LaunchMembers starts in-process consumers at once and returns without
// waiting for their joins (a join storm; WaitJoined waits for each).
func (c *Cluster) LaunchMembers(t testing.TB, opts ...MemberOptions) []*Member {
	t.Helper()
	ms := make([]*Member, len(opts))
	for i, o := range opts {
		ms[i] = c.startMember(t, o)
	}
	return ms
}

func (c *Cluster) startMember(t testing.TB, opts MemberOptions) *Member {
	t.Helper()
	cfg := c.ConsumerConfig(t, opts)
	cfg.Logger = c.logger.Named(opts.Name)
	m := &Member{Name: opts.Name, log: c.Log, done: make(chan struct{}), joined: make(chan struct{}), caps: map[int32]string{}}
	var once sync.Once
	emit := func(l Line) {
		if l.Kind == LineJoined {
			m.mu.Lock()
			m.member = l.Member
			m.mu.Unlock()
			once.Do(func() { close(m.joined) })
		}
		if (l.Kind == LineGrant || l.Kind == LineRenew) && l.Capability != "" {
			m.mu.Lock()
			m.caps[l.Partition] = l.Capability
			m.mu.Unlock()
		}
		c.Log.AddConsumerLine(opts.Name, l)
	}
	m.Recorder = NewRecorder(opts.Group, opts.PrintSecrets, emit)
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		err := RunConsumer(ctx, cfg, m.Recorder, emit)
		m.mu.Lock()
		m.err = err
		m.mu.Unlock()
	}()
	cleanup(t, "member "+opts.Name, func() { m.Close(t) })
	return m
}

// WaitJoined waits until the member joined (20 s at most).
func (m *Member) WaitJoined(t testing.TB) {
	t.Helper()
	if err := m.AwaitJoin(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// AwaitJoin waits until the member joined and says why not: it stopped
// before (the SDK's first join is bounded by join_timeout, 30 s: one
// refused for good, or cut off by failures that long, fails and the
// consumer stops), or timeout passed.
func (m *Member) AwaitJoin(timeout time.Duration) error {
	select {
	case <-m.joined:
		return nil
	case <-m.done:
		return fmt.Errorf("%s: stopped before joining: %v", m.Name, m.Err())
	case <-time.After(timeout):
		return fmt.Errorf("%s: not joined after %v", m.Name, timeout)
	}
}

// MemberID is the member id of the last join.
func (m *Member) MemberID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.member
}

// Capabilities are the member's last capability per partition (granted
// or renewed); only a member started with PrintSecrets records them.
func (m *Member) Capabilities() map[int32]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.caps)
}

// Err is the error that ended the consumer, if it ended.
func (m *Member) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Hold keeps coordinator calls of op from being sent until release.
func (m *Member) Hold(op string) (release func()) { return m.Recorder.Hold(op) }

// Kill cuts every request of the member and stops it without leaving: the
// coordinator learns of it only by its silence.
func (m *Member) Kill() {
	m.log.AddFault("kill", m.Name)
	m.mu.Lock()
	m.killed = true
	m.mu.Unlock()
	m.Recorder.Kill()
	m.cancel()
	<-m.done
}

// Close closes the member gracefully (revoke, release, leave) and waits;
// a killed member is only waited for.
func (m *Member) Close(t testing.TB) {
	m.mu.Lock()
	killed := m.killed
	m.mu.Unlock()
	if !killed {
		m.log.AddFault("close", m.Name)
	}
	m.cancel()
	select {
	case <-m.done:
	case <-time.After(20 * time.Second):
		t.Errorf("%s: still closing after 20s", m.Name)
	}
	m.Recorder.CloseIdleConnections()
}

// ConsumerProcess is a consumer process (e2e/harness/cmd/consumer): its
// stdout lines go to the log; it can be killed (-9), stopped and
// continued. Safe for concurrent use.
type ConsumerProcess struct {
	Name string
	*Process
	log *Log

	mu    sync.Mutex
	lines []Line
}

// StartConsumerProcess starts a consumer process and waits until it
// joined.
func (c *Cluster) StartConsumerProcess(t testing.TB, opts MemberOptions) *ConsumerProcess {
	t.Helper()
	if c.opts.Binaries.Consumer == "" {
		t.Fatal("harness: consumer processes need Options.Binaries (harness.Build)")
	}
	if opts.TopicPattern != "" {
		t.Fatal("harness: a consumer process subscribes to the cluster's topic only")
	}
	cfg := c.ConsumerConfig(t, opts)
	cc := cfg.Client
	args := []string{
		"-coordinator", cc.CoordinatorURL, "-gateways", strings.Join(cc.Gateways, ","), "-group", cc.Group,
		"-topic", cc.Topics[0], "-instance-id", cc.InstanceID, "-session-timeout", cc.SessionTimeout.String(),
		"-heartbeat-wait", cc.HeartbeatWait.String(), "-fetch-max-wait", cc.FetchMaxWait.String(),
		"-request-timeout", cc.RequestTimeout.String(), "-revoke-timeout", cc.RevokeTimeout.String(),
		"-expiry-margin", cc.CapabilityExpiryMargin.String(), "-commit-interval", cfg.CommitInterval.String(),
		fmt.Sprintf("-print-secrets=%v", cfg.PrintSecrets), fmt.Sprintf("-sync-commit=%v", cfg.SyncCommit),
	}
	p := &ConsumerProcess{Name: opts.Name, log: c.Log}
	onLine := func(b []byte) {
		var l Line
		if err := json.Unmarshal(b, &l); err != nil {
			c.Log.Dropped()
			return
		}
		p.mu.Lock()
		p.lines = append(p.lines, l)
		p.mu.Unlock()
		c.Log.AddConsumerLine(opts.Name, l)
	}
	p.Process = StartProcess(t, opts.Name, c.opts.Binaries.Consumer, args, stack.CleanEnv("HARNESS_CREDENTIAL="+cc.Credential), onLine, nil)
	cleanup(t, "consumer "+opts.Name, p.stop)
	Eventually(t, 20*time.Second, opts.Name+" joined", func() (bool, string) {
		if p.Exited() {
			t.Fatalf("%s exited: %v\n%s", opts.Name, p.Wait(0), p.Tail())
		}
		return p.MemberID() != "", "no join answered yet"
	})
	return p
}

// Lines returns a copy of the lines printed so far.
func (p *ConsumerProcess) Lines() []Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lines)
}

// MemberID is the member id of the last join.
func (p *ConsumerProcess) MemberID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.lines) - 1; i >= 0; i-- {
		if p.lines[i].Kind == LineJoined {
			return p.lines[i].Member
		}
	}
	return ""
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *ConsumerProcess) Kill() {
	p.log.AddFault("kill", p.Name)
	p.Process.Kill()
}

// Pause sends SIGSTOP.
func (p *ConsumerProcess) Pause(t testing.TB) {
	t.Helper()
	p.log.AddFault("stop", p.Name)
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

// Resume sends SIGCONT.
func (p *ConsumerProcess) Resume(t testing.TB) {
	t.Helper()
	p.log.AddFault("cont", p.Name)
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// stop closes a running consumer gracefully, bounded; a stopped one is
// continued first, a dead one left alone.
func (p *ConsumerProcess) stop() {
	if p.Exited() {
		return
	}
	_ = p.Process.Terminate(15 * time.Second)
}

// Terminate sends SIGTERM (graceful close) and waits for the exit.
func (p *ConsumerProcess) Terminate(t testing.TB) {
	t.Helper()
	p.log.AddFault("close", p.Name)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(20 * time.Second); err != nil {
		t.Errorf("%s: %v\n%s", p.Name, err, p.Tail())
	}
}
