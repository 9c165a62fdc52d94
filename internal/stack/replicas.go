package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/store"
)

// Coordinator replicas (DESIGN §9): with Options.Coordinators > 1 (or
// Options.KafkaState) every coordinator keeps its state in the Kafka log
// on the stack's own kfake cluster and runs as a replica — in this process
// (coordinator.NewReplica) or as a `capgate coordinator` process with the
// same config. One leads; the others answer not_leader naming it. The
// gateways get every coordinator's URL; CoordinatorURL is the leader's.

// replicas says whether the stack's coordinators run as replicas.
func (o Options) replicas() bool { return o.Coordinators > 1 || o.KafkaState }

// kekFile is the stack's key-encryption key (made once, 0600).
func (s *Stack) kekFile() (string, error) {
	path := filepath.Join(s.opts.Dir, "state.kek")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.WriteFile(path, []byte(store.GenerateKEK()), 0o600); err != nil {
		return "", fmt.Errorf("stack: kek: %w", err)
	}
	return path, nil
}

// replicaConfig makes cfg one replica of the stack's coordinators: the
// Kafka-log state, the shared KEK, the replica's own id and URL, and
// every replica's URL (its console's links when it stops).
func (co *Coordinator) replicaConfig(cfg *coordinator.Config) {
	cfg.State = coordinator.StateKafka
	cfg.KafkaState.KEKFile = co.s.kek
	cfg.Replica.ID = co.Name
	cfg.Replica.Advertise = co.URL
	cfg.Replica.Peers = co.s.CoordinatorURLs()
}

func (co *Coordinator) startReplica(cfg coordinator.Config, ln net.Listener) error {
	r, err := coordinator.NewReplica(cfg, co.s.logger(co.Name), co.withListener(ln)...)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return fmt.Errorf("stack: %s: %w", co.Name, err)
	}
	done, stopped := make(chan error, 1), make(chan struct{})
	go func() {
		done <- r.Run(context.Background())
		close(stopped)
	}()
	co.mu.Lock()
	co.rep, co.done, co.stopped = r, done, stopped
	co.mu.Unlock()
	return nil
}

// Replica is the running in-process replica (nil for a process, when
// stopped, or without replicas).
func (co *Coordinator) Replica() *coordinator.Replica {
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.rep
}

// Role asks the coordinator whether it leads and whom it names: an
// in-process replica directly, a process through /readyz ("role",
// "leader"). A coordinator that is not a replica leads; one that is not
// running is a follower naming nobody.
func (co *Coordinator) Role(ctx context.Context) (leader.Role, string, error) {
	if !co.s.opts.replicas() {
		return leader.Leader, co.URL, nil
	}
	if r := co.Replica(); r != nil {
		role, hint, _ := r.Watch()
		return role, hint.URL, nil
	}
	if co.Process() == nil {
		return leader.Follower, "", nil
	}
	_, body, err := DoJSON(ctx, co.s.http, http.MethodGet, co.URL+"/readyz", "", nil, nil)
	if err != nil {
		return leader.Follower, "", err
	}
	var ready struct {
		Role   string         `json:"role"`
		Leader string         `json:"leader"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(body, &ready); err != nil {
		return leader.Follower, "", fmt.Errorf("stack: %s /readyz: %s", co.Name, body)
	}
	switch {
	case ready.Error != nil:
		return leader.Candidate, "", nil // taking over, stepping down, not following yet
	case ready.Role == "leader":
		return leader.Leader, co.URL, nil
	}
	return leader.Follower, ready.Leader, nil
}

// roleWait bounds Leader's question to one replica: a paused one
// (SIGSTOP) accepts the connection and never answers, and with the
// stack's HTTP timeout (30 s) every CoordinatorURL — a member's start, a
// client configuration — waited that long (e2e/ha's zombie tests took
// 35 s for it).
const roleWait = time.Second

// roleWithin is Role asked within d.
func (co *Coordinator) roleWithin(ctx context.Context, d time.Duration) (leader.Role, string, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return co.Role(ctx)
}

// running says whether the coordinator was started and not stopped.
func (co *Coordinator) running() bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.rep != nil || co.in != nil || co.proc != nil
}

// Leader is the coordinator that leads now while every other running one
// follows naming it, or nil (no leader yet, a takeover in progress, or
// two replicas that both took over until the earlier one's next write
// fails fenced).
func (s *Stack) Leader(ctx context.Context) *Coordinator {
	var lead *Coordinator
	named := map[string]int{}
	running := 0
	for _, co := range s.Coordinators() {
		if !co.running() {
			continue
		}
		running++
		role, hint, err := co.roleWithin(ctx, roleWait)
		switch {
		case err != nil:
			return nil
		case role == leader.Leader && lead != nil:
			return nil
		case role == leader.Leader:
			lead = co
		case role == leader.Follower:
			named[hint]++
		}
	}
	if lead == nil || named[lead.URL] != running-1 {
		return nil
	}
	return lead
}

// WaitLeader waits until a coordinator leads and returns it (polling the
// real parts; in-process replicas signal every change).
func (s *Stack) WaitLeader(ctx context.Context) (*Coordinator, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if co := s.Leader(ctx); co != nil {
			return co, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stack: no coordinator leads: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// CoordinatorURLs lists every coordinator's base URL, first first.
func (s *Stack) CoordinatorURLs() []string {
	var urls []string
	for _, co := range s.Coordinators() {
		urls = append(urls, co.URL)
	}
	return urls
}

// syncURL is what gateways sync with: every replica (they follow
// not_leader), or the one coordinator.
func (s *Stack) syncURL() string {
	if s.opts.replicas() {
		return strings.Join(s.CoordinatorURLs(), ",")
	}
	return s.Coordinator().URL
}
