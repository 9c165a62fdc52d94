package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/capgate/capgate/coordinator"
)

// Coordinator is one coordinator of a stack: in this process
// (coordinator.New) or a `capgate coordinator` process. Its address and
// data directory stay the same across Kill and Start, so a restart finds
// its state (a process's first start may move to another free port when
// its own was taken: ports.go). Safe for concurrent use.
type Coordinator struct {
	s     *Stack
	Index int    // 0 for the first
	Name  string // "coordinator", "coordinator-2", …
	partAddr
	DataDir string
	process bool
	dir     string // where a process's config file goes

	mu      sync.Mutex
	in      *coordinator.Coordinator
	rep     *coordinator.Replica // replicas.go
	done    chan error           // Run's result (in-process)
	stopped chan struct{}        // closed when Run returned (in-process)
	proc    *Process
}

func (s *Stack) newCoordinator(i int) (*Coordinator, error) {
	name := "coordinator"
	if i > 0 {
		name = fmt.Sprintf("coordinator-%d", i+1)
	}
	listen := ""
	if i == 0 {
		listen = s.opts.CoordinatorListen
	}
	// Dir/<name> is the data directory (capgate dev's layout since its
	// first release: a restart on the same --data-dir keeps the state).
	co := &Coordinator{s: s, Index: i, Name: name,
		DataDir: filepath.Join(s.opts.Dir, name), process: s.opts.CoordinatorProcess, dir: s.opts.Dir}
	if err := co.partAddr.init(listen, s.opts.scheme(), co.process); err != nil {
		return nil, err
	}
	return co, nil
}

// Config is the configuration the coordinator runs with: the defaults,
// the stack's broker, secrets and timing, then Options.Coordinator.
func (co *Coordinator) Config() coordinator.Config {
	s := co.s
	cfg := coordinator.DefaultConfig()
	cfg.Listen, cfg.DataDir = co.Addr, co.DataDir
	cfg.Broker = s.BrokerConfig()
	cfg.AdminTokenHashes = []string{coordinator.HashSecret(s.AdminToken)}
	cfg.SyncTokenHashes = []string{coordinator.HashSecret(s.SyncToken)}
	cfg.ShutdownTimeout = 5 * time.Second
	s.opts.Timing.applyCoordinator(&cfg)
	if s.opts.replicas() {
		co.replicaConfig(&cfg)
	}
	if s.opts.Coordinator != nil {
		s.opts.Coordinator(co.Index, &cfg)
	}
	return cfg
}

// Start starts the coordinator (again, after Kill or Stop) and waits
// until it answers /healthz. A start that failed because its address was
// in use is retried (ports.go): a process's first start on another free
// port, a restart on the same address for up to restartRetry.
func (co *Coordinator) Start(ctx context.Context) error { return startPart(ctx, co, co.Name) }

// start is one attempt of Start, on ln when it is not nil (the
// reservation: an in-process coordinator is handed it, a process's is
// closed just before the process starts).
func (co *Coordinator) start(ctx context.Context, ln net.Listener) error {
	cfg := co.Config()
	if co.process {
		if ln != nil {
			ln.Close()
			onReleased(co.Name, co.Addr)
		}
		if err := co.startProcess(cfg); err != nil {
			return err
		}
	} else if co.s.opts.replicas() {
		if err := co.startReplica(cfg, ln); err != nil {
			return err
		}
	} else if err := co.startInProcess(cfg, ln); err != nil {
		return err
	}
	gone, reason := co.gone()
	return WaitOK(ctx, co.s.http, co.URL+"/healthz", gone, reason)
}

// withListener is the options of an in-process coordinator or replica:
// the stack's broker and, on its first start, the reservation.
func (co *Coordinator) withListener(ln net.Listener) []coordinator.Option {
	opts := []coordinator.Option{coordinator.WithBroker(co.s.Broker)}
	if ln != nil {
		opts = append(opts, coordinator.WithListener(ln))
	}
	return opts
}

func (co *Coordinator) startInProcess(cfg coordinator.Config, ln net.Listener) error {
	in, err := coordinator.New(cfg, co.s.logger(co.Name), co.withListener(ln)...)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return fmt.Errorf("stack: %s: %w", co.Name, err)
	}
	done, stopped := make(chan error, 1), make(chan struct{})
	go func() {
		done <- in.Run(context.Background())
		close(stopped)
	}()
	co.mu.Lock()
	co.in, co.done, co.stopped = in, done, stopped
	co.mu.Unlock()
	return nil
}

func (co *Coordinator) startProcess(cfg coordinator.Config) error {
	if co.s.opts.Binary == "" {
		return errors.New("stack: CoordinatorProcess needs Options.Binary")
	}
	proc, err := Launch{Name: co.Name, Bin: co.s.opts.Binary, Dir: co.dir, Section: "coordinator", Settings: &cfg,
		OnLine: co.s.lineSink(co.Name)}.Start()
	if err != nil {
		return err
	}
	co.mu.Lock()
	co.proc = proc
	co.mu.Unlock()
	return nil
}

// gone is a channel closed when the coordinator stops (its process
// exits or Run returns) and the reason it stopped.
func (co *Coordinator) gone() (<-chan struct{}, func() error) {
	co.mu.Lock()
	proc, done, stopped := co.proc, co.done, co.stopped
	co.mu.Unlock()
	if co.process {
		return proc.Done(), func() error { return fmt.Errorf("%s exited: %v\n%s", co.Name, proc.Wait(0), proc.Tail()) }
	}
	return stopped, func() error {
		err := <-done
		done <- err // keep it for Stop
		return fmt.Errorf("%s stopped: %v", co.Name, err)
	}
}

// Kill stops the coordinator at once: SIGKILL for a process, Close for
// one in this process (graceful: held polls answered 503). Start brings
// it back.
func (co *Coordinator) Kill() {
	co.mu.Lock()
	proc, in, rep, done := co.proc, co.in, co.rep, co.done
	co.in, co.rep, co.proc = nil, nil, nil
	co.mu.Unlock()
	if proc != nil {
		proc.Kill()
	}
	if in != nil {
		_ = in.Close()
		<-done
	}
	if rep != nil {
		_ = rep.Close()
		<-done
	}
}

// Stop shuts the coordinator down gracefully (SIGTERM for a process) and
// returns what stopped it badly, if anything.
func (co *Coordinator) Stop() error {
	co.s.http.CloseIdleConnections()
	co.mu.Lock()
	proc, in, rep, done := co.proc, co.in, co.rep, co.done
	co.in, co.rep, co.proc = nil, nil, nil
	co.mu.Unlock()
	co.release()
	if proc != nil {
		if err := proc.Terminate(10 * time.Second); err != nil {
			return fmt.Errorf("stack: %s: %w\n%s", co.Name, err, proc.Tail())
		}
	}
	if in != nil {
		_ = in.Close()
	}
	if rep != nil {
		_ = rep.Close()
	}
	if in != nil || rep != nil {
		if err := <-done; err != nil {
			return fmt.Errorf("stack: %s run: %w", co.Name, err)
		}
	}
	return nil
}

// InProcess is the running in-process coordinator (nil for a process or
// when stopped); of a replica, its Coordinator while it leads.
func (co *Coordinator) InProcess() *coordinator.Coordinator {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.rep != nil {
		return co.rep.Leading()
	}
	return co.in
}

// Process is the coordinator's process (nil in-process or when stopped).
func (co *Coordinator) Process() *Process {
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.proc
}
