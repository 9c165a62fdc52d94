package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/internal/stack"
)

// deploymentOptions describe one deployment: a kfake cluster with topics
// and, unless KafkaOnly, a coordinator and gateways in front of it.
type deploymentOptions struct {
	Topics map[string]int32
	// Kafka are extra kfake options (broker configs such as the KIP-848
	// heartbeat interval).
	Kafka []kfake.Opt
	// KafkaOnly starts the broker alone (Kafka's own group protocols).
	KafkaOnly bool
	// Gateways is how many gateways to start (0 is allowed).
	Gateways int
	// Coordinator edits the coordinator's configuration before it starts.
	Coordinator func(*coordinator.Config)
	// Tee, if set, gives a zap core each part's log lines also go to.
	Tee func(part string) zapcore.Core
}

// lastClose is when a deployment of this process was last torn down; see
// waitReleased.
var lastClose struct {
	sync.Mutex
	at time.Time
}

// waitReleased waits until the deployments torn down earlier in this
// process are garbage: fasthttp's worker pools keep a closed server
// reachable for up to 10 s (their cleanup goroutine sleeps that long), so
// heap figures taken sooner would count the previous benchmark's broker
// data.
func waitReleased() {
	lastClose.Lock()
	at := lastClose.at
	lastClose.Unlock()
	if !at.IsZero() {
		time.Sleep(time.Until(at.Add(11 * time.Second)))
	}
}

// deployment is one stack (stack.Start, shipped defaults) inside the
// benchmark process, every part real and on loopback. Scenarios close it
// when they finish, so that runs do not pile up; tb.Cleanup closes
// whatever is left.
type deployment struct {
	*stack.Stack
	log       *zap.Logger
	closeOnce sync.Once
}

// startDeployment starts the broker and, unless opts.KafkaOnly, the
// coordinator and opts.Gateways gateways, waiting until each is ready.
// Logs: CAPGATE_E2E_LOG (see harness.Logger).
func startDeployment(tb testing.TB, opts deploymentOptions) *deployment {
	tb.Helper()
	d := &deployment{log: harness.Logger(tb)}
	sopts := stack.Options{
		Dir: tb.TempDir(), Topics: opts.Topics, KafkaOptions: opts.Kafka, KafkaOnly: opts.KafkaOnly, Gateways: opts.Gateways,
		HTTP: &http.Client{Timeout: 60 * time.Second}, Logger: func(part string) *zap.Logger { return d.log.Named(part) },
	}
	if opts.Tee != nil {
		sopts.Logger = func(part string) *zap.Logger {
			return d.log.Named(part).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, opts.Tee(part)) }))
		}
	}
	if opts.Coordinator != nil {
		sopts.Coordinator = func(_ int, cfg *coordinator.Config) { opts.Coordinator(cfg) }
	}
	s, err := stack.Start(context.Background(), sopts)
	if err != nil {
		tb.Fatal(err)
	}
	d.Stack = s
	tb.Cleanup(func() { d.close(tb) })
	return d
}

// close tears everything down, newest part first; later calls do nothing.
func (d *deployment) close(tb testing.TB) {
	d.closeOnce.Do(func() {
		start := time.Now()
		if err := d.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
		if took := time.Since(start); took > 500*time.Millisecond {
			tb.Logf("closing the deployment took %v", took.Round(time.Millisecond))
		}
		lastClose.Lock()
		lastClose.at = time.Now()
		lastClose.Unlock()
	})
}

// credential mints a client credential for group on every topic.
func (d *deployment) credential(tb testing.TB, group string) string {
	cred, err := d.ClientCredential(context.Background(), "bench-"+group, []string{group}, []string{"*"}, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	return cred
}

// admin sends an admin request (in as JSON unless nil), decodes a 2xx
// answer into out (unless nil), and returns the status; a non-2xx answer
// is an error.
func (d *deployment) admin(method, path string, in, out any) (int, error) {
	return doJSON(context.Background(), d.HTTP(), method, d.CoordinatorURL()+path, d.AdminToken, in, out)
}

// doJSON is stack.DoJSON with a non-2xx answer as an error carrying the
// body.
func doJSON(ctx context.Context, hc *http.Client, method, url, bearer string, in, out any) (int, error) {
	status, raw, err := stack.DoJSON(ctx, hc, method, url, bearer, in, out)
	if err == nil && status/100 != 2 {
		err = fmt.Errorf("%s %s: %d %s", method, url, status, raw)
	}
	return status, err
}

// profilePhase writes a CPU profile of one phase of a scenario to
// $CAPGATE_BENCH_PROFILE_DIR/<name>.cpu when that variable is set (the
// whole benchmark's -cpuprofile mixes in setup and load generation).
func profilePhase(tb testing.TB, name string) (stop func()) {
	dir := os.Getenv("CAPGATE_BENCH_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, name+".cpu"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		tb.Logf("profile %s: %v", name, err) // another profile is running
		_ = f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}
