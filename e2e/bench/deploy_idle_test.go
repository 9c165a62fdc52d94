package bench

import (
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// fakeSys points sysRoot at a directory holding the given files (paths
// relative to /sys) for the rest of t.
func fakeSys(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for rel, body := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := sysRoot
	sysRoot = dir
	t.Cleanup(func() { sysRoot = old })
	return dir
}

func TestIdleSetting(t *testing.T) {
	fakeSys(t, map[string]string{
		"devices/system/cpu/cpuidle/current_driver":   "haltpoll\n",
		"devices/system/cpu/cpuidle/current_governor": "haltpoll\n",
		haltPollParam: "0\n",
	})
	if got, want := idleSetting(), "cpuidle haltpoll/haltpoll, guest_halt_poll_ns 0"; got != want {
		t.Fatalf("idleSetting() = %q, want %q", got, want)
	}
	fakeSys(t, map[string]string{
		"devices/system/cpu/cpuidle/current_driver":      "intel_idle\n",
		"devices/system/cpu/cpuidle/current_governor_ro": "menu\n",
	})
	if got, want := idleSetting(), "cpuidle intel_idle/menu"; got != want {
		t.Fatalf("idleSetting() = %q, want %q", got, want)
	}
	fakeSys(t, nil)
	if got := idleSetting(); got != "unknown" {
		t.Fatalf("idleSetting() with nothing shown = %q, want unknown", got)
	}
}

// TestSetHaltPoll: the asked value is written for the run and the one
// before it is back after.
func TestSetHaltPoll(t *testing.T) {
	dir := fakeSys(t, map[string]string{haltPollParam: "0\n"})
	param := filepath.Join(dir, haltPollParam)
	t.Setenv(haltPollEnv, "200000")
	t.Run("run", func(t *testing.T) {
		setHaltPoll(t)
		if b, _ := os.ReadFile(param); string(b) != "200000" {
			t.Fatalf("during the run: %q, want 200000", b)
		}
	})
	if b, _ := os.ReadFile(param); string(b) != "0\n" {
		t.Fatalf("after the run: %q, want the value before it", b)
	}
}

// TestHaltPollRestoredBeforeTheAlarm: a run killed by -timeout runs no
// cleanup, so the setting goes back haltPollMargin before the alarm.
func TestHaltPollRestoredBeforeTheAlarm(t *testing.T) {
	restored := make(chan struct{})
	stop := guardRestore(func() { close(restored) }, time.Now().Add(haltPollMargin))
	defer stop()
	select {
	case <-restored:
	case <-time.After(time.Minute):
		t.Fatal("the setting was not put back before the -timeout alarm")
	}
}

// TestHaltPollRestoredOnATermination: SIGTERM (a CI runner's stop, a
// kill) puts the setting back before the process ends. The guard raises
// the signal again after the restore, to end the process as it would
// have: the test catches both (its own kill and the guard's) before it
// stops catching, or the second would end the test binary.
func TestHaltPollRestoredOnATermination(t *testing.T) {
	caught := make(chan os.Signal, 2)
	signal.Notify(caught, syscall.SIGTERM)
	defer signal.Stop(caught)
	restored := make(chan struct{})
	stop := guardRestore(func() { close(restored) }, time.Time{})
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(time.Minute)
	select {
	case <-restored:
	case <-timeout:
		t.Fatal("the setting was not put back on SIGTERM")
	}
	for range 2 {
		select {
		case <-caught:
		case <-timeout:
			t.Fatal("the guard did not raise SIGTERM again after the restore")
		}
	}
}
