package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestQoSClearTakesALogLevelOrMonitorOff: `admin qos --clear` takes an
// override's log level or monitor tag off and keeps the rest — the API
// had `clear` (console6), the CLI had no flag, and a second qos with an
// empty --log-level keeps the old one (empty = keep). Clearing an
// unknown field, or a field the same command sets, is a usage error
// (exit 2) and changes nothing.
func TestQoSClearTakesALogLevelOrMonitorOff(t *testing.T) {
	base, admin := startCoordinator(t)
	flags := []string{"--coordinator", base, "--token", admin, "-o", "json"}
	type override struct {
		LogLevel       string `json:"log_level"`
		Monitor        string `json:"monitor"`
		MaxBytesPerSec int64  `json:"max_bytes_per_sec"`
	}
	qos := func(args ...string) (string, error) {
		return run(t, append(append([]string{"admin", "qos"}, args...), flags...)...)
	}
	listed := func() []override {
		t.Helper()
		out, err := qos("list")
		var list struct {
			Overrides []override `json:"overrides"`
		}
		if err != nil || json.Unmarshal([]byte(out), &list) != nil {
			t.Fatalf("qos list: %v\n%s", err, out)
		}
		return list.Overrides
	}
	want := func(step string, w override) {
		t.Helper()
		if got := listed(); len(got) != 1 || got[0] != w {
			t.Fatalf("%s: qos list = %+v, want one override %+v", step, got, w)
		}
	}
	if out, err := qos("--group", "billing", "--log-level", "debug", "--monitor", "canary", "--max-bytes-per-sec", "4000"); err != nil {
		t.Fatalf("qos: %v\n%s", err, out)
	}
	want("set", override{"debug", "canary", 4000})

	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"--clear", "ttl"}, `--clear "ttl": the fields an override can lose are log_level and monitor`},
		{[]string{"--clear", "max_bytes_per_sec"}, "--max-bytes-per-sec 0 removes a rate"},
		{[]string{"--clear", "log_level", "--log-level", "info"}, "--clear log_level and --log-level info in one command"},
		{[]string{"--clear", "log_level,monitor", "--monitor", "blue"}, "--clear monitor and --monitor blue in one command"},
	} {
		out, err := qos(append([]string{"--group", "billing"}, bad.args...)...)
		if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), bad.says) {
			t.Fatalf("qos %v: %v (exit %d)\n%s; want exit %d saying %q", bad.args, err, exitCode(err), out, exitUsage, bad.says)
		}
	}
	want("after the refused ones", override{"debug", "canary", 4000})

	if out, err := qos("--group", "billing", "--clear", "log-level"); err != nil {
		t.Fatalf("qos --clear log-level: %v\n%s", err, out)
	}
	want("log level cleared", override{"", "canary", 4000})
	if out, err := qos("--group", "billing", "--clear", "monitor", "--log-level", "warn"); err != nil {
		t.Fatalf("qos --clear monitor --log-level warn: %v\n%s", err, out)
	}
	want("monitor cleared, a level set", override{"warn", "", 4000})
	if out, err := qos("--group", "billing", "--clear", "log_level,monitor", "--clear", "monitor"); err != nil {
		t.Fatalf("qos --clear log_level,monitor: %v\n%s", err, out)
	}
	want("both cleared", override{"", "", 4000})
}
