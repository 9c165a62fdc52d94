package bench

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// How this machine's vCPUs idle decides the slow mode's price
// (deploy_sched.go): a vCPU that halts must be woken by an
// inter-processor interrupt, one that polls for a while before halting
// is woken by a flag and costs its waker nothing more. The VM this
// benchmark was built on idles with the cpuidle "haltpoll" driver but
// boots with haltpoll.guest_halt_poll_ns=0 (no polling; the driver's
// default is 200000 ns): BENCHMARKS.md §0, "Thirty-second pass". The
// sequential phase prints the setting beside its figures, and
// haltPollEnv sets the poll window for a run (root only; restored
// after) so both settings can be measured on one machine.

// haltPollEnv, when set, is the haltpoll driver's guest_halt_poll_ns for
// the run (e.g. 200000, the driver's default); the setting before it is
// restored when the benchmark ends.
const haltPollEnv = "CAPGATE_BENCH_HALTPOLL_NS"

// sysRoot is where the kernel's sysfs is (a test points it elsewhere).
var sysRoot = "/sys"

const haltPollParam = "module/haltpoll/parameters/guest_halt_poll_ns"

// idleSetting describes how the vCPUs idle: the cpuidle driver and
// governor and, with the haltpoll driver, its poll window —
// "haltpoll/haltpoll, guest_halt_poll_ns 0". Parts the kernel does not
// show are left out; "unknown" when it shows none.
func idleSetting() string {
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(sysRoot, rel))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	driver := read("devices/system/cpu/cpuidle/current_driver")
	governor := read("devices/system/cpu/cpuidle/current_governor")
	if governor == "" {
		governor = read("devices/system/cpu/cpuidle/current_governor_ro")
	}
	var parts []string
	if driver != "" || governor != "" {
		parts = append(parts, "cpuidle "+driver+"/"+governor)
	}
	if ns := read(haltPollParam); ns != "" {
		parts = append(parts, "guest_halt_poll_ns "+ns)
	}
	if parts == nil {
		return "unknown"
	}
	return strings.Join(parts, ", ")
}

// setHaltPoll applies haltPollEnv, if set, for the rest of tb and
// restores the previous value in its cleanup. It fails tb when the value
// is not a number of nanoseconds or the kernel will not take it (no
// haltpoll driver, not root): a run asked for a setting must not
// silently measure another.
func setHaltPoll(tb testing.TB) {
	v := strings.TrimSpace(os.Getenv(haltPollEnv))
	if v == "" {
		return
	}
	if _, err := strconv.ParseUint(v, 10, 32); err != nil {
		tb.Fatalf("%s=%q: want a number of nanoseconds", haltPollEnv, v)
	}
	path := filepath.Join(sysRoot, haltPollParam)
	before, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%s: %v (is the cpuidle haltpoll driver in use?)", haltPollEnv, err)
	}
	if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
		tb.Fatalf("%s: %v (setting it needs root)", haltPollEnv, err)
	}
	restore := sync.OnceFunc(func() {
		if err := os.WriteFile(path, before, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "%s: restoring %s to %s: %v\n", haltPollEnv, path, strings.TrimSpace(string(before)), err)
		}
	})
	tb.Cleanup(restore)
	tb.Cleanup(guardRestore(restore, testDeadline()))
}

// processStart is about when the test binary's -timeout alarm started.
var processStart = time.Now()

// haltPollMargin is how long before the -timeout alarm the setting is put
// back: the alarm panics the binary, which runs no cleanup.
const haltPollMargin = 10 * time.Second

// testDeadline is when the test binary's -timeout alarm fires (zero:
// none, or not a test binary).
func testDeadline() time.Time {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return time.Time{}
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return time.Time{}
	}
	if d, ok := g.Get().(time.Duration); ok && d > 0 {
		return processStart.Add(d)
	}
	return time.Time{}
}

// guardRestore runs restore when the run is about to end without its
// cleanup — haltPollMargin before deadline (the -timeout alarm), or on an
// interrupt or a termination signal (then raised again, to end the
// process as it would have) — so that a machine-wide kernel setting is
// never left changed for every later run on the host (review26). It
// returns what stops the guard.
func guardRestore(restore func(), deadline time.Time) (stop func()) {
	var timer *time.Timer
	if !deadline.IsZero() {
		timer = time.AfterFunc(time.Until(deadline)-haltPollMargin, func() {
			fmt.Fprintf(os.Stderr, "%s: the -timeout alarm is near: the setting before the run is back\n", haltPollEnv)
			restore()
		})
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			restore()
			signal.Stop(sig)
			if p, err := os.FindProcess(os.Getpid()); err == nil {
				_ = p.Signal(s)
			}
		case <-done:
		}
	}()
	return func() {
		if timer != nil {
			timer.Stop()
		}
		signal.Stop(sig)
		close(done)
	}
}
