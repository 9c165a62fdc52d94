package main

import (
	"strings"
	"testing"
)

// TestFlagValuesComplete: a flag that takes one of a set completes to
// the set, and to no file — `capgate consume -o <TAB>` offered the
// directory's files (newuser5). Also an inherited one (admin's --output
// below admin groups), and one name meaning two sets (produce -o). What
// follows "|" is typed before the TAB: a comma-separated flag completes
// the item after a comma — `admin qos --clear log_level,<TAB>` offered
// log_level and monitor, which the shell matched against "log_level,":
// nothing, so only a first value could be completed. An item typed is
// not offered again; no space follows (:6), so a comma can.
func TestFlagValuesComplete(t *testing.T) {
	for args, want := range map[string]string{
		"consume -o":                           "start\nend\n:4\n",
		"consume --format":                     "text\njson\n:4\n",
		"produce -o":                           "text\njson\n:4\n",
		"admin groups -o":                      "table\njson\nyaml\n:4\n",
		"dev --log-level":                      "debug\ninfo\nwarn\nerror\n:4\n",
		"admin offsets reset g t --to":         "earliest\nlatest\n:4\n",
		"admin config g --offset-reset":        "earliest\nlatest\n:4\n",
		"admin qos --clear":                    "log_level\nmonitor\n:6\n",
		"admin qos --clear|log_level,":         "log_level,monitor\n:6\n",
		"admin qos --clear|monitor,l":          "monitor,log_level\n:6\n",
		"admin qos --clear|monitor,log_level,": ":6\n",
	} {
		words, typed, _ := strings.Cut(args, "|")
		out, err := run(t, append(append([]string{"__complete"}, strings.Fields(words)...), typed)...)
		if err != nil || !strings.HasPrefix(out, want) {
			t.Errorf("capgate %s <TAB>: %q %v, want %q (values, no files)", args, out, err, want)
		}
	}
}

// TestNamesComplete: a topic or group argument or flag completes to the
// coordinator's names when an admin token is at hand — the command's
// flags or $CAPGATE_ADMIN_TOKEN, as capgate dev's credentials.env sets —
// and never to the directory's files: `capgate consume -t <TAB>` and
// `capgate admin group <TAB>` offered them (newuser10). Without a token,
// or with no coordinator answering, nothing is offered (:4, no files).
func TestNamesComplete(t *testing.T) {
	// Every command and flag named for completion exists: a rename
	// would leave its names uncompleted, silently.
	root := newRoot()
	for path := range nameArgs {
		if cmd, rest, err := root.Find(strings.Fields(path)); err != nil || len(rest) != 0 || cmd.ValidArgsFunction == nil {
			t.Errorf("nameArgs %q: no such command with a completion (%v %v)", path, rest, err)
		}
	}
	for key := range nameFlags {
		words := strings.Fields(key)
		cmd, _, err := root.Find(words[:len(words)-1])
		if err != nil || cmd.Flags().Lookup(words[len(words)-1]) == nil {
			t.Errorf("nameFlags %q: no such flag (%v)", key, err)
		}
	}
	base, admin := startCoordinator(t) // topic orders
	flags := []string{"--coordinator", base, "--token", admin}
	if _, err := run(t, append([]string{"admin", "config", "billing", "--offset-reset", "latest"}, flags...)...); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CAPGATE_COORDINATOR_URL", base)
	t.Setenv("CAPGATE_ADMIN_TOKEN", admin)
	for args, want := range map[string]string{
		"admin group":                                  "describe\tDescribe a group, as rpk group describe\nbilling\n:4\n",
		"admin group describe|b":                       "billing\n:4\n",
		"admin offsets reset billing":                  "--to\tearliest (or start, beginning), latest (or end), or an offset\norders\n:4\n", // the required flag first
		"admin topic describe":                         "orders\n:4\n",
		"admin grant --topic":                          "orders\n:4\n",
		"consume -t":                                   "orders\n:6\n",
		"consume -t|orders,":                           ":6\n",
		"consume -g":                                   "billing\n:4\n",
		"produce -t|o":                                 "orders\n:4\n",
		"admin topic describe orders":                  ":4\n",
		"admin group describe|x":                       ":4\n",
		"admin topic --coordinator http://127.0.0.1:1": "describe\tDescribe a topic, as rpk topic describe -p\n:4\n",
	} {
		words, typed, _ := strings.Cut(args, "|")
		out, err := run(t, append(append([]string{"__complete"}, strings.Fields(words)...), typed)...)
		if strings.HasPrefix(words, "admin group") && !strings.Contains(words, "describe") {
			// cobra lists describe and delete first; keep the
			// assertion on what follows them.
			out = strings.Replace(out, "delete\tDelete a group: its committed offsets, settings and leases; refused while members are alive unless --force\n", "", 1)
		}
		if err != nil || !strings.HasPrefix(out, want) {
			t.Errorf("capgate %s <TAB>: %q %v, want %q (names, no files)", args, out, err, want)
		}
	}
	t.Setenv("CAPGATE_ADMIN_TOKEN", "")
	t.Chdir(t.TempDir()) // no capgate-data/credentials.json to find
	if out, err := run(t, "__complete", "consume", "-t", ""); err != nil || !strings.HasPrefix(out, ":6\n") {
		t.Errorf("consume -t <TAB> without an admin token: %q %v, want nothing and no files", out, err)
	}
}
