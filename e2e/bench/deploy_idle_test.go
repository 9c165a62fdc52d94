package bench

import (
	"os"
	"path/filepath"
	"testing"
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
