package main

import (
	"strings"
	"testing"
)

// TestHelpTopics: `capgate help environment|exit-codes|output` print their
// man-page-like topic, listed in the root's help; a word that is no
// command and no topic is a usage error (exit 2) naming what it may have
// meant — cobra's help found the root, which takes any word, and printed
// the root's help with exit 0 (`capgate help enviroment` looked answered).
func TestHelpTopics(t *testing.T) {
	for topic, says := range map[string]string{
		"environment": "CAPGATE_GATEWAY_SYNC_TIMEOUT=5s",
		"exit-codes":  "2  the command line is wrong",
		"output":      "-o (--output) table, json or yaml",
	} {
		out, err := run(t, "help", topic)
		if err != nil || !strings.Contains(out, says) {
			t.Errorf("capgate help %s: %v\n%s", topic, err, out)
		}
	}
	root, err := run(t, "--help")
	if err != nil || !strings.Contains(root, "Additional help topics:") || !strings.Contains(root, "capgate exit-codes") {
		t.Errorf("capgate --help does not list the help topics: %v\n%s", err, root)
	}
	if out, err := run(t, "help", "admin", "offsets", "reset"); err != nil || !strings.Contains(out, "capgate admin offsets reset GROUP TOPIC") {
		t.Errorf("capgate help admin offsets reset: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"help", "enviroment"}, `no command or help topic "enviroment" in "capgate"; did you mean environment?`},
		{[]string{"help", "nosuch"}, "help topics: environment, exit-codes, output"},
		{[]string{"help", "admin", "grups"}, `no command or help topic "grups" in "capgate admin"; did you mean group or groups?`},
		{[]string{"help", "topic"}, "did you mean capgate admin topic?"},
	} {
		out, err := run(t, c.args...)
		if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), c.says) {
			t.Errorf("capgate %s: %v (exit %d)\n%s\nwant a usage error saying %q", strings.Join(c.args, " "), err, exitCode(err), out, c.says)
		}
	}
}
