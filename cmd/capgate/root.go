package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/internal/buildinfo"
)

func newRoot() *cobra.Command {
	info := buildinfo.Read()
	root := &cobra.Command{
		Use:           "capgate",
		Short:         "Capability-token fetch authorization for Apache Kafka",
		SilenceUsage:  true,
		SilenceErrors: true,
		// capgate --version (and -v), as most CLIs answer it; `capgate
		// version` says more.
		Version: fmt.Sprintf("%s (commit %s, %s)", info.Version, info.Commit, info.GoVersion),
	}
	root.SetVersionTemplate("capgate {{.Version}}\n")
	root.PersistentPreRun = warnUnknownVariablesHook
	root.SetFlagErrorFunc(flagUsageError)
	root.AddCommand(newCoordinatorCmd(), newGatewayCmd(), newKeysCmd(), newTokenCmd(), newAdminCmd(),
		newDevCmd(), newConsumeCmd(), newProduceCmd(), newVersionCmd())
	// cobra adds `completion` only when it runs: added now, it refuses an
	// unknown shell as the other grouping commands refuse an unknown word
	// (`capgate completion tcsh` printed its help and exited 0). It takes
	// its writer when made: laterOut follows a SetOut after this.
	root.SetOut(laterOut{root})
	root.InitDefaultCompletionCmd()
	root.SetOut(nil)
	addHelpTopics(root)
	addExamples(root)
	refuseStrayArguments(root)
	refuseUnknownSubcommands(root)
	requiredFlagsAreUsageErrors(root)
	completeFlagValues(root)
	completeNames(root)
	return root
}

// refuseStrayArguments makes every command that declares no arguments
// refuse them. cobra accepts any below the root: `capgate coordinator
// config.yaml` ran a coordinator on the defaults, ignoring the file the
// user named, and `capgate keys jwks other.json` printed keys.json's keys.
// (Run before refuseUnknownSubcommands: grouping commands take a word.)
func refuseStrayArguments(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseStrayArguments(sub)
	}
	if cmd == cmd.Root() || !cmd.Runnable() {
		return
	}
	if declared := cmd.Args; declared != nil {
		// cobra.NoArgs, ExactArgs, …: their refusals are usage errors too.
		cmd.Args = func(c *cobra.Command, args []string) error {
			err := declared(c, args)
			switch {
			case err == nil:
				return nil
			case errors.As(err, new(usageError)):
				return err
			case strings.Contains(err.Error(), " arg(s), "):
				// cobra's count check ("accepts 3 arg(s), received 2")
				// names no argument.
				if want := argsWanted(c.Use); want != "" {
					name := strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
					return usageErrorf("%s: want %s, got %s (see %s --help)", name, want, argCount(len(args)), c.CommandPath())
				}
				if len(args) > 0 { // `admin groups list`: "accepts 0 arg(s), received 1"
					return usageErrorf("%s takes no arguments, got %q (see %s --help)", c.CommandPath(), args[0], c.CommandPath())
				}
			}
			return usageError{err}
		}
		return
	}
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("%s takes no arguments, got %q", c.CommandPath(), args[0])
		for _, flag := range []string{"config", "file", "out"} {
			if c.Flags().Lookup(flag) != nil {
				msg += fmt.Sprintf(" (a file goes in --%s)", flag)
				break
			}
		}
		return usageErrorf("%s (see %s --help)", msg, c.CommandPath())
	}
}

// argsWanted is the arguments a command's Use line names: its first
// form ("offsets GROUP | offsets reset …" → GROUP), the words after the
// command's name up to the first flag ("reset GROUP TOPIC [PARTITION]
// --to …" → GROUP TOPIC [PARTITION]).
func argsWanted(use string) string {
	first, _, _ := strings.Cut(use, " | ")
	words := strings.Fields(first)
	var args []string
	for _, w := range words[min(1, len(words)):] {
		if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "[-") {
			break
		}
		args = append(args, w)
	}
	return strings.Join(args, " ")
}

// argCount is n arguments in words.
func argCount(n int) string {
	switch n {
	case 0:
		return "none"
	case 1:
		return "1 argument"
	}
	return fmt.Sprintf("%d arguments", n)
}

// adminCommand is "capgate admin WORD" when the root c was given a word
// only admin has — rpk's and kafka-topics' habits: `capgate topic
// describe demo`, `capgate group describe g` were "unknown command" and
// no more.
func adminCommand(c *cobra.Command, word string) string {
	if c != c.Root() {
		return ""
	}
	for _, sub := range c.Commands() {
		if sub.Name() != "admin" {
			continue
		}
		if found, rest, err := sub.Find([]string{word}); err == nil && found != sub && len(rest) == 0 {
			return found.CommandPath()
		}
	}
	return ""
}

// refuseUnknownSubcommands makes every command that only groups others
// (the root, admin, keys, token, admin oauth-client, …) fail on a word it
// does not know, as a usage error. cobra checks unknown words only at the
// root, with a plain error (exit 1): below it, a grouping command given
// `capgate admin describe demo` printed its help and exited 0, so a typo
// in a script looked like success. The root takes the same RunE: its Args
// set, cobra's own root check (legacyArgs) never runs.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if cmd.Runnable() || !cmd.HasSubCommands() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only on the root
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[groupingAnnotation] = "true"
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		if args[0] == "help" { // `capgate admin help groups`, as git and kubectl take it
			target, rest, err := c.Find(args[1:])
			if err == nil && target != nil && (len(rest) == 0 || target != c) {
				return target.Help()
			}
			args = args[1:]
		}
		return unknownSubcommand(c, args[0])
	}
}

// groupingAnnotation marks the commands refuseUnknownSubcommands made
// refuse unknown words (they only group others).
const groupingAnnotation = "capgate-grouping"

// unknownSubcommand is the usage error for word, which grouping command c
// does not know, with the commands it may have meant.
func unknownSubcommand(c *cobra.Command, word string) error {
	msg := fmt.Sprintf("unknown command %q for %q", word, c.CommandPath())
	if s := c.SuggestionsFor(word); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	} else if admin := adminCommand(c, word); admin != "" {
		msg += "; did you mean " + admin + "?"
	}
	return usageErrorf("%s (see %s --help)", msg, c.CommandPath())
}

// laterOut writes to root's output as it is at the write.
type laterOut struct{ root *cobra.Command }

func (l laterOut) Write(p []byte) (int, error) { return l.root.OutOrStdout().Write(p) }

// warnUnknownVariablesHook is the root's PersistentPreRun: every command
// but those that refuse the variables themselves, and completion (its
// output is the shell's).
func warnUnknownVariablesHook(cmd *cobra.Command, _ []string) {
	switch strings.Fields(cmd.CommandPath() + " x")[1] {
	case "coordinator", "gateway", "completion", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
		return
	}
	warnUnknownVariables(cmd.ErrOrStderr(), os.Environ())
}
