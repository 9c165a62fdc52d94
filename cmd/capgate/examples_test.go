package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasWorkingExamples: every command's --help has an
// Examples section (rpk's habit; only two had one), and every capgate
// line of every example parses against the command tree as the shell
// would hand it over — the command exists, its flags exist and take
// their values, its arguments are what it accepts and its required flags
// are given — so an example never teaches a flag that was renamed.
func TestEveryCommandHasWorkingExamples(t *testing.T) {
	var walk func(cmd *cobra.Command)
	lines := 0
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
		if cmd.Hidden || cmd.IsAdditionalHelpTopicCommand() || cmd.Parent() != nil && cmd.Parent().Name() == "completion" {
			return // help topics (text, no command), and completion's per-shell commands (their --help says how to load them)
		}
		if strings.TrimSpace(cmd.Example) == "" {
			t.Errorf("%s --help has no Examples", cmd.CommandPath())
			return
		}
		for _, line := range strings.Split(cmd.Example, "\n") {
			args := exampleArgs(line)
			if args == nil {
				continue
			}
			lines++
			if err := parseExample(args); err != nil {
				t.Errorf("%s --help: example %q: %v", cmd.CommandPath(), strings.TrimSpace(line), err)
			}
		}
	}
	walk(newRoot())
	if lines < 60 {
		t.Errorf("%d example lines checked, want every command's (60 or more)", lines)
	}
}

// parseExample parses args (after "capgate") as cobra would run them,
// stopping short of running.
func parseExample(args []string) error {
	root := newRoot()
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if !cmd.Runnable() {
		return fmt.Errorf("%s is not a command that runs", cmd.CommandPath())
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return err
	}
	return cmd.ValidateRequiredFlags()
}

// exampleArgs is the arguments of the capgate command on an example
// line, as a shell splits them (quotes removed), without what follows a
// comment, a pipe or a redirection; nil when the line runs no capgate.
func exampleArgs(line string) []string {
	line = strings.TrimSpace(line)
	if i := strings.LastIndex(line, "| capgate "); i >= 0 {
		line = line[i+2:]
	}
	if !strings.HasPrefix(line, "capgate ") && line != "capgate" {
		return nil
	}
	var args []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		case !inWord && strings.ContainsRune("#|<>", r):
			return args[1:]
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args[1:]
}
