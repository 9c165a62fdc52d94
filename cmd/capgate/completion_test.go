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
