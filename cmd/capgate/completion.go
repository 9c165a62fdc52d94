package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagValues are the values shell completion offers for a flag that
// takes one of a set, by flag name — and, where one name means two sets,
// by the command (its path without "capgate "). Without them `capgate
// consume -o <TAB>` offered the directory's files (newuser5). A flag
// that takes a comma-separated list (a string slice: admin qos --clear)
// completes each item after a comma too (listCompletions).
var flagValues = map[string][]string{
	"output":             {"table", "json", "yaml"},
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
		complete := cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
		if f.Value.Type() == "stringSlice" {
			complete = listCompletions(values)
		}
		_ = cmd.RegisterFlagCompletionFunc(f.Name, complete)
	}
	cmd.LocalNonPersistentFlags().VisitAll(register)
	cmd.PersistentFlags().VisitAll(register)
}

// listCompletions completes the last item of a comma-separated list:
// `--clear log_level,<TAB>` offered log_level and monitor, which the
// shell then matched against "log_level," — nothing, so only a first
// value could ever be completed. Each offer is the items typed so far
// and one value not among them; with no space after it, so another
// comma can follow.
func listCompletions(values []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		cut := strings.LastIndexByte(toComplete, ',') + 1
		typed, head := strings.Split(toComplete[:cut], ","), toComplete[:cut]
		var offers []string
		for _, v := range values {
			if !slices.Contains(typed, v) {
				offers = append(offers, head+v)
			}
		}
		return offers, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}
