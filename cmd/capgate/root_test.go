package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestUnknownSubcommandFails: a word a grouping command does not know is
// an error naming it (with a suggestion when one is close), not its help
// and exit 0 — `capgate admin describe demo` looked like success.
func TestUnknownSubcommandFails(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"admin", "describe", "demo"}, `unknown command "describe" for "capgate admin"`},
		{[]string{"admin", "gatways"}, `did you mean gateways?`},
		{[]string{"keys", "nosuch"}, `unknown command "nosuch" for "capgate keys"`},
		{[]string{"token", "inspekt"}, `did you mean inspect?`},
		{[]string{"admin", "oauth-client", "delete", "x"}, `unknown command "delete" for "capgate admin oauth-client"`},
		{[]string{"nosuch"}, `unknown command "nosuch" for "capgate"`},
		// cobra adds completion at Execute: it printed its help, exit 0.
		{[]string{"completion", "tcsh"}, `unknown command "tcsh" for "capgate completion"`},
	} {
		if err := execute(c.args); err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, new(usageError)) {
			t.Errorf("capgate %s: %v, want a usage error containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	// Without a word, a grouping command still shows its help.
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"admin"})
	if err := root.Execute(); err != nil || !strings.Contains(out.String(), "Available Commands:") {
		t.Fatalf("capgate admin: %v\n%s", err, out.String())
	}
}

// TestStrayArgumentsFail: an argument a command does not take is an
// error, not ignored — `capgate coordinator config.yaml` ran on the
// defaults without the file, `capgate keys jwks other.json` printed the
// keys of keys.json, `capgate admin grant … extra` minted anyway.
func TestStrayArgumentsFail(t *testing.T) {
	// Each would fail or write only in a temporary directory if the
	// argument were ignored again.
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"coordinator", "c.yaml", "--config", dir + "/none.yaml"}, `capgate coordinator takes no arguments, got "c.yaml" (a file goes in --config)`},
		{[]string{"gateway", "g.yaml", "--config", dir + "/none.yaml"}, `(a file goes in --config)`},
		{[]string{"keys", "jwks", "other.json", "--file", dir + "/none.json"}, `(a file goes in --file)`},
		{[]string{"keys", "generate", "x.json", "--out", dir + "/keys.json"}, `(a file goes in --out)`},
		{[]string{"admin", "grant", "--topic", "t", "--holder", "h", "extra", "--coordinator", "http://127.0.0.1:1", "--token", "x"},
			`capgate admin grant takes no arguments, got "extra"`},
	} {
		if err := execute(c.args); err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, new(usageError)) {
			t.Errorf("capgate %s: %v, want a usage error containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

// execute runs the command line args, its output discarded.
func execute(args []string) error { return executeContext(context.Background(), args) }

// executeStopped runs args with a context already ended: a server command
// that starts stops at once (returning nil) instead of serving.
func executeStopped(args []string) error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return executeContext(ctx, args)
}

func executeContext(ctx context.Context, args []string) error {
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	return root.ExecuteContext(ctx)
}

// TestVersionFlagAndHelpWord: `capgate --version` (and -v) answer as
// most CLIs do, and `capgate admin help groups` shows that command's help
// as git and kubectl do — both were errors (unknown flag; unknown
// command "help").
func TestVersionFlagAndHelpWord(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}} {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil || !strings.HasPrefix(out.String(), "capgate ") || !strings.Contains(out.String(), "commit") {
			t.Errorf("capgate %s: %v %q", args[0], err, out.String())
		}
	}
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"admin", "help", "groups"})
	if err := root.Execute(); err != nil || !strings.Contains(out.String(), "List consumer groups") {
		t.Errorf("capgate admin help groups: %v %q", err, out.String())
	}
	if err := execute([]string{"admin", "help", "nosuch"}); err == nil || !strings.Contains(err.Error(), `unknown command "nosuch"`) {
		t.Errorf("capgate admin help nosuch: %v", err)
	}
}
