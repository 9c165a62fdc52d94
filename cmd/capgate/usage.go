package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/config"
)

// Exit statuses: a usage error (the command line itself is wrong) is 2,
// as Go's flag package, rpk's flag parsing and POSIX utilities have it;
// any other failure is 1.
const (
	exitFailure = 1
	exitUsage   = 2
)

// usageError is a mistake in the command line: an unknown or malformed
// flag, a flag value out of its set (consume --offset), a stray argument,
// an unknown subcommand. Scripts can tell it from a failure of the work.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usageErrorf is fmt.Errorf as a usageError.
func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitCode is the status the command exits with after err.
func exitCode(err error) int {
	if errors.As(err, new(usageError)) {
		return exitUsage
	}
	return exitFailure
}

// flagUsageError makes cobra's flag parsing errors (unknown flag, a value
// that does not parse) usage errors; set on the root, every command
// inherits it. An unknown shorthand flag may be an argument that begins
// with '-' — a jti minted before jtis stopped beginning with one, a key
// id, a client id —, which pflag reads as flags: the error then says how
// to pass it (after "--"); a Kafka tool's flag (foreignflags.go) says
// what to use instead, and is never taken for an argument.
func flagUsageError(cmd *cobra.Command, err error) error {
	if word := cmd.Flags().Arg(0); cmd.Annotations[groupingAnnotation] != "" && word != "" && word != "help" {
		// `capgate admin oauth create --name x`: cobra stops at admin
		// (no "oauth" under it) and parses the rest as admin's flags,
		// so the error was "unknown flag: --name", not the mistyped
		// command (newuser7).
		return unknownSubcommand(cmd, word)
	}
	if hinted := foreignFlagHint(cmd, err); hinted != err {
		return usageError{hinted}
	}
	if hinted := durationHint(cmd, err); hinted != nil {
		return usageError{hinted}
	}
	if hinted := numberHint(cmd, err); hinted != nil {
		return usageError{hinted}
	}
	if flag := similarFlag(cmd, err); flag != "" {
		return usageErrorf("%w; did you mean --%s? (see %s --help)", err, flag, cmd.CommandPath())
	}
	const shorthand = "unknown shorthand flag: "
	msg := err.Error()
	if i := strings.LastIndex(msg, " in -"); strings.HasPrefix(msg, shorthand) && i > 0 && takesArguments(cmd) {
		arg := msg[i+len(" in "):]
		return usageErrorf("%w; if %s is an argument, put it after --: %s -- %s", err, arg, cmd.CommandPath(), arg)
	}
	// A flag like no flag of cmd, a value that does not parse: say where
	// the flags are (it was "unknown flag: --bogus" and no more; newuser14).
	return usageErrorf("%w (see %s --help)", err, cmd.CommandPath())
}

// durationHint says what a duration flag wants when its value did not
// parse: "--idle-exit 10" was refused with Go's `time: missing unit in
// duration "10"`, not what to write instead (newuser7); the config files
// say it (config.checker.scalar), the flags now in the same words.
func durationHint(cmd *cobra.Command, err error) error {
	var invalid *pflag.InvalidValueError
	if !errors.As(err, &invalid) || invalid.GetFlag().Value.Type() != "duration" {
		return nil
	}
	name, value := invalid.GetFlag().Name, invalid.GetValue()
	if _, perr := strconv.ParseFloat(value, 64); perr == nil {
		return fmt.Errorf("--%s %s: %s is not a duration: write it with a unit, e.g. %ss (see %s --help)", name, value, value, value, cmd.CommandPath())
	}
	return fmt.Errorf("--%s %q: want a duration such as 30s, 500ms or 5m (units ns, us, ms, s, m, h) (see %s --help)", name, value, cmd.CommandPath())
}

// numberHint says what a whole-number flag wants when its value did not
// parse: "--partition x" was refused with `invalid argument "x" for "-p,
// --partition" flag: strconv.ParseInt: parsing "x": invalid syntax`
// (newuser14).
func numberHint(cmd *cobra.Command, err error) error {
	var invalid *pflag.InvalidValueError
	if !errors.As(err, &invalid) {
		return nil
	}
	kind := invalid.GetFlag().Value.Type()
	if !strings.HasPrefix(kind, "int") && !strings.HasPrefix(kind, "uint") || strings.HasSuffix(kind, "Slice") {
		return nil
	}
	want := "a whole number"
	if strings.HasPrefix(kind, "uint") {
		want = "a whole number ≥ 0"
	}
	if errors.Is(err, strconv.ErrRange) {
		want += " that fits in " + kind
	}
	return fmt.Errorf("--%s %q: want %s (see %s --help)", invalid.GetFlag().Name, invalid.GetValue(), want, cmd.CommandPath())
}

// similarFlag is the flag of cmd closest to the unknown long flag err
// names, when it is close enough to be the one meant — a letter off
// (consume --gateway for --gateways, --topics for --topic) or one name
// the start of the other (--group-id, --token-files): cobra said "unknown
// flag: --gateway" and no more.
func similarFlag(cmd *cobra.Command, err error) string {
	typed, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok || typed == "" {
		return ""
	}
	best, bestDistance := "", -1
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		d := config.EditDistance(typed, f.Name)
		if min(len(typed), len(f.Name)) >= 4 && (strings.HasPrefix(typed, f.Name) || strings.HasPrefix(f.Name, typed)) {
			d = min(d, 2)
		}
		if f.Hidden || d > 2 || d >= len(typed) {
			return
		}
		if bestDistance < 0 || d < bestDistance || (d == bestDistance && f.Name < best) {
			best, bestDistance = f.Name, d
		}
	})
	return best
}

// takesArguments: cmd's Use line names an argument before its flags
// (argsWanted: "revoke-capability JTI"; not "consume -g GROUP", whose
// GROUP is a flag's value).
func takesArguments(cmd *cobra.Command) bool { return argsWanted(cmd.Use) != "" }

// groupArg refuses a group name the coordinator would refuse, as a usage
// error that says the rule (client.CheckGroupName): a name with '/' was
// sent and came back as a 404 for a route that does not exist.
func groupArg(group string) error {
	if err := client.CheckGroupName(group); err != nil {
		return usageError{err}
	}
	return nil
}

// requiredFlagsAreUsageErrors makes a missing required flag
// (MarkFlagRequired) a usage error that names the flag and the command's
// help. cobra checks required flags after PreRunE and returns a plain
// error, so each command that has one checks them first, in its PreRunE.
func requiredFlagsAreUsageErrors(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		requiredFlagsAreUsageErrors(sub)
	}
	if !cmd.Runnable() || len(requiredFlags(cmd)) == 0 {
		return
	}
	declared := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		var missing []string
		for _, name := range requiredFlags(c) {
			if !c.Flags().Changed(name) {
				missing = append(missing, "--"+name)
			}
		}
		switch len(missing) {
		case 0:
		case 1:
			return usageErrorf("%s is required (see %s --help)", missing[0], c.CommandPath())
		default:
			return usageErrorf("%s are required (see %s --help)", strings.Join(missing, ", "), c.CommandPath())
		}
		if declared != nil {
			return declared(c, args)
		}
		return nil
	}
}

// requiredFlags are the names of cmd's flags marked required, in the
// order cobra lists them.
func requiredFlags(cmd *cobra.Command) []string {
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if v := f.Annotations[cobra.BashCompOneRequiredFlag]; len(v) > 0 && v[0] == "true" {
			names = append(names, f.Name)
		}
	})
	return names
}
