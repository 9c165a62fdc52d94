package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagValues are the values shell completion offers for a flag that
// takes one of a set, by flag name — and, where one name means two sets,
// by the command (its path without "capgate "). Without them `capgate
// consume -o <TAB>` offered the directory's files (newuser5).
var flagValues = map[string][]string{
	"output":             {"table", "json"},
	"produce output":     {"text", "json"},
	"consume offset":     {"start", "end"},
	"consume format":     {"text", "json"},
	"log-level":          {"debug", "info", "warn", "error"},
	"admin qos clear":    {"log_level", "monitor"},
	"to":                 {"earliest", "latest"},
	"offset-reset":       {"earliest", "latest"},
	"token inspect kind": {"capgate+jwt", "capgate-client+jwt", "capgate-member+jwt"},
}

// completeFlagValues registers flagValues' completions on cmd and every
// command below it, on the flags each declares (persistent ones on the
// command that declares them).
func completeFlagValues(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		completeFlagValues(sub)
	}
	path := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	register := func(f *pflag.Flag) {
		values, ok := flagValues[path+" "+f.Name]
		if !ok {
			values, ok = flagValues[f.Name]
		}
		if !ok {
			return
		}
		_ = cmd.RegisterFlagCompletionFunc(f.Name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
	}
	cmd.LocalNonPersistentFlags().VisitAll(register)
	cmd.PersistentFlags().VisitAll(register)
}
