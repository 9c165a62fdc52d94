package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/config"
)

// Help topics: `capgate help environment|exit-codes|output`, man-page
// sections that belong to no one command (rpk's `rpk -X help`, git's
// `git help everyday`). cobra lists a command with neither a run function
// nor subcommands under "Additional help topics". `capgate help WORD` for
// a word that is no command and no topic printed the root's help and
// exited 0 (cobra's help found the root, which takes any word), so
// `capgate help enviroment` looked answered: newHelpCmd refuses it as a
// usage error (exit 2) with the names it may have meant (newuser9).

// helpTopics are the topics' commands, made anew for each root.
func helpTopics() []*cobra.Command {
	return []*cobra.Command{{
		Use:   "environment",
		Short: "The CAPGATE_* variables: the CLI's, capgate dev's credentials.env, and every setting",
		Long: `The variables the CLI reads. A flag wins over its variable.

  CAPGATE_COORDINATOR_URL  the coordinator's URL, or its replicas' URLs comma-separated
                           (--coordinator; default http://127.0.0.1:7070): admin, consume,
                           produce, keys rotate; token inspect verifies against its JWKS
  CAPGATE_GATEWAY_URLS     the gateways' URLs, comma-separated, tried in order (--gateways;
                           default http://127.0.0.1:8080): consume, produce
  CAPGATE_ADMIN_TOKEN      the admin token (--token, --token-file): admin, keys rotate,
                           produce (mints capabilities), consume (its lag display)
  CAPGATE_CREDENTIAL       a client credential (--credential, --credential-file): consume,
                           produce (when no admin token is set)
  CAPGATE_CAPABILITY       a partition capability (--capability): produce -p
  CAPGATE_CACERT           the PEM CA bundle servers' certificates chain to (--cacert)
  CAPGATE_CERT, CAPGATE_KEY  a client certificate and its key, for mTLS (--cert, --key)
  CAPGATE_LEADER_URL       the replica that leads (for curl, which follows no redirect to
                           the leader); the CLI does not read it
  CAPGATE_KAFKA_BOOTSTRAP  a gateway's Kafka listener, for Kafka clients (kcat -b); the CLI
                           does not read it

capgate dev writes the URLs, tokens, the CA bundle (with --tls) and the Kafka
listener into capgate-data/credentials.env (mode 0600); in another shell:

  . ./capgate-data/credentials.env

A file works where a secret goes: --token-file and --credential-file take
capgate dev's credentials.json or credentials.env, or a file holding the
token alone.

capgate coordinator and capgate gateway take every setting of their config
file from the environment too: CAPGATE_ and the setting's YAML path in upper
case, dots as underscores — CAPGATE_GATEWAY_SYNC_TIMEOUT=5s is
gateway.sync_timeout (config.example.yaml lists them all, with defaults). An
unknown CAPGATE_* variable is an error naming the setting it is nearest to;
the CLI's variables above are skipped, so a shell that sourced
credentials.env still starts them. Every other command warns on stderr of
a CAPGATE_* variable that is neither the CLI's nor a setting's, and goes on:

  capgate: warning: CAPGATE_GATEWAY_URL is set, but capgate reads no such
  variable: it is ignored; did you mean CAPGATE_GATEWAY_URLS?`,
	},
		{
			Use:   "exit-codes",
			Short: "What capgate's exit statuses mean: 0 done, 1 failed, 2 usage",
			Long: `  0  done. consume also exits 0 when --max-records were printed, or when
     --idle-exit found nothing more to read.
  1  the work failed: a server refused it or could not be reached, a file
     could not be read, no credential or token was found in the flags, files
     or environment, Ctrl-C (produce says what was written), a demo check
     failed.
  2  the command line is wrong, and nothing was sent: an unknown command or
     help topic, an unknown or malformed flag (one a letter off a real flag
     says which), a flag value outside its set (consume -o 42), a missing
     required flag (consume without --group), a stray or malformed argument
     (admin revoke G T x), a group or topic name no group or topic can
     have, a --coordinator that is no http(s) URL.

Errors go to stderr as one line beginning "capgate: ", saying what happened
and what to do; output for scripts (-o json) goes to stdout.`,
		},
		{
			Use:   "output",
			Short: "Tables on a terminal, JSON or YAML for scripts: -o table|json|yaml",
			Long: `The admin commands, keys rotate and version print tables on a terminal
and JSON when their output goes to a pipe or a file, so

  capgate admin groups                 # a table
  capgate admin groups | jq .          # JSON
  capgate admin group g -o yaml        # YAML, whatever the output is

-o (--output) table, json or yaml chooses. JSON is the admin API's answer as
it came, indented (docs: api/openapi.yaml, GET /openapi.json); YAML is the
same document. Tables lay a list out with upper-case headers, as rpk does,
and one object as KEY value lines; times the API gives as unix seconds
(exp, until) are printed as RFC 3339.

Text the server hands back (a reason another admin gave, a holder, a
message) is printed with control characters, bidi overrides and the like
escaped — a table cell holding one is quoted ("ok\x1b[2J"), JSON and YAML
strings carry \u escapes — so nothing in it can clear, recolour or retitle
your terminal.

consume prints one record a line: partition, offset, key and value, tab
separated (-f json: one JSON object a line; -f takes kcat's format strings
too). produce sums up what it wrote on stderr, and with -o json also prints
one object on stdout.`,
		}}
}

// addHelpTopics adds the topics and the help command that refuses an
// unknown word.
func addHelpTopics(root *cobra.Command) {
	root.AddCommand(helpTopics()...)
	root.SetHelpCommand(newHelpCmd(root))
}

// newHelpCmd is cobra's help command, but a word that is no command and
// no topic is a usage error naming what exists.
func newHelpCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [command | topic]",
		Short: "Help about any command, or a topic: " + strings.Join(topicNames(), ", "),
		Long: "Help provides help for any command in the application, and these topics:\n" +
			strings.Join(topicNames(), ", ") + ".\nSimply type capgate help [path to command] for full details.",
		Example: "  capgate help consume\n  capgate help admin offsets reset\n  capgate help environment",
		Args:    cobra.ArbitraryArgs,
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			target := root
			if len(args) > 0 {
				if found, _, err := root.Find(args); err == nil {
					target = found
				}
			}
			var names []string
			for _, sub := range target.Commands() {
				if sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
					if strings.HasPrefix(sub.Name(), toComplete) {
						names = append(names, sub.Name())
					}
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil {
				return usageError{err}
			}
			// root.Find stops at the last command it knows and leaves
			// the words it does not: those are a mistake, not arguments.
			if word := firstUnknown(target, rest); word != "" {
				return unknownHelpTopic(target, word)
			}
			target.InitDefaultHelpFlag()
			target.InitDefaultVersionFlag()
			return target.Help()
		},
	}
}

// firstUnknown is the first word Find left over below a command that
// has subcommands (the root and the grouping commands take any word, to
// refuse it themselves), "" when there is none: a leaf's words are its
// arguments, and its help is still what was asked for.
func firstUnknown(target *cobra.Command, rest []string) string {
	if !target.HasSubCommands() {
		return ""
	}
	for _, a := range rest {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// unknownHelpTopic is the usage error of `capgate help … WORD`.
func unknownHelpTopic(c *cobra.Command, word string) error {
	msg := fmt.Sprintf("no command or help topic %q in %q", word, c.CommandPath())
	if s := append(c.SuggestionsFor(word), similarTopics(c, word)...); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	} else if admin := adminCommand(c, word); admin != "" {
		msg += "; did you mean " + admin + "?"
	}
	if c == c.Root() && !strings.Contains(msg, "did you mean") {
		msg += "; help topics: " + strings.Join(topicNames(), ", ")
	}
	return usageErrorf("%s (see %s --help)", msg, c.CommandPath())
}

func topicNames() []string {
	var names []string
	for _, t := range helpTopics() {
		names = append(names, t.Name())
	}
	return names
}

// similarTopics are the root's topics word may have meant: a prefix of
// one, or at most two edits from it (cobra suggests commands only).
func similarTopics(c *cobra.Command, word string) []string {
	if c != c.Root() {
		return nil
	}
	var out []string
	for _, name := range topicNames() {
		if strings.HasPrefix(name, strings.ToLower(word)) || config.EditDistance(name, strings.ToLower(word)) <= 2 {
			out = append(out, name)
		}
	}
	return out
}
