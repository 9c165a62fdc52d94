package main

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/capgate/capgate/coordinator"
)

// TestAdminAuditFilterFlags (newuser #11): admin audit's --action, --who,
// --target, --exclude-action and --exclude-target reach the coordinator's
// filters, one query value per flag value (a comma stays in the value),
// and --before pages with them.
func TestAdminAuditFilterFlags(t *testing.T) {
	base, admin := startCoordinator(t)
	flags := []string{"--coordinator", base, "--token", admin}
	do := func(args ...string) string {
		t.Helper()
		out, err := run(t, append(append([]string{"admin"}, args...), flags...)...)
		if err != nil {
			t.Fatalf("admin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	grant := func(holder, partition string) {
		do("grant", "--topic", "orders", "--partition", partition, "--holder", holder, "--ops", "produce", "--ttl", "1m")
	}
	// Oldest first: capgate produce's grants (holder capgate-produce)
	// around an operator's.
	grant("capgate-produce", "0")
	do("config", "a,b", "--max-moves-per-second", "2")
	grant("capgate-produce", "1")
	do("config", "a-only", "--max-moves-per-second", "2")
	grant("auditor", "1")
	grant("capgate-produce", "0")

	audit := func(args ...string) ([]string, uint64) {
		t.Helper()
		var page coordinator.AuditResponse
		out := do(append([]string{"audit", "-o", "json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &page); err != nil {
			t.Fatalf("audit %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		got := []string{}
		for _, e := range page.Entries {
			got = append(got, e.Action+" "+e.Target)
		}
		return got, page.NextBefore
	}
	for args, want := range map[string][]string{
		"--exclude-target capgate-produce@":                       {"capabilities auditor@orders/1", "group_config a-only", "group_config a,b"},
		"--exclude-action capabilities":                           {"group_config a-only", "group_config a,b"},
		"--action capabilities --target capgate-produce@orders/1": {"capabilities capgate-produce@orders/1"},
		"--target a,b":             {"group_config a,b"},
		"--target a,b --target a-": {"group_config a-only", "group_config a,b"},
		"--who token:" + coordinator.HashSecret(admin)[:12] + " --action group_config": {"group_config a-only", "group_config a,b"},
		"--who token:000000000000": {},
	} {
		if got, _ := audit(strings.Fields(args)...); !reflect.DeepEqual(got, want) {
			t.Errorf("audit %s:\n got %q\nwant %q", args, got, want)
		}
	}
	first, next := audit("--limit", "1", "--exclude-target", "capgate-produce@")
	second, _ := audit("--limit", "1", "--exclude-target", "capgate-produce@", "--before", strconv.FormatUint(next, 10))
	if !reflect.DeepEqual(first, []string{"capabilities auditor@orders/1"}) || !reflect.DeepEqual(second, []string{"group_config a-only"}) {
		t.Fatalf("paging with a filter: %q (next_before %d), then %q", first, next, second)
	}
	out, err := run(t, append([]string{"admin", "audit", "--action", strings.Repeat("x", 257)}, flags...)...)
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "action: a value is at most 256 bytes") {
		t.Fatalf("a 257-byte --action: %v\n%s", err, out)
	}
}

// TestProduceHelpSaysWhatItMints (newuser #11): produce --help says each
// partition written mints one audited capability and how to leave them
// out of admin audit; admin audit --help says the same filter.
func TestProduceHelpSaysWhatItMints(t *testing.T) {
	for args, want := range map[string][]string{
		"produce --help":     {"target capgate-produce@TOPIC/PARTITION", `"admin action" log line`, "200 lines piped\nin at once mint at most 2", "capgate admin audit --exclude-target capgate-produce@"},
		"admin audit --help": {"--exclude-target capgate-produce@", "--limit counts what the filters keep"},
	} {
		out, err := run(t, strings.Fields(args)...)
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s lacks %q:\n%s", args, w, out)
			}
		}
	}
}
