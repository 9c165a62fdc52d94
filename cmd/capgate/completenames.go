package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/capgate/capgate/coordinator"
)

// nameArgs are the topic and group names a command's arguments take, by
// command path, for shell completion; nameFlags the flags that take one.
// They offered the directory's files: `capgate consume -t <TAB>`,
// `capgate admin group <TAB>` (newuser10). Now the coordinator's names
// when an admin token is at hand (flags, $CAPGATE_ADMIN_TOKEN, as the
// command itself would take it), else nothing — never files.
var (
	nameArgs = map[string][]string{
		"admin group": {"group"}, "admin group describe": {"group"}, "admin group delete": {"group"},
		"admin config": {"group"}, "admin offsets": {"group"}, "admin offsets reset": {"group", "topic"},
		"admin revoke": {"group", "topic"}, "admin lease": {"group", "topic"}, "admin revoke-member": {"group"},
		"admin topic": {"topic"}, "admin topic describe": {"topic"},
	}
	nameFlags = map[string]string{
		"consume topic": "topic", "consume group": "group", "produce topic": "topic", "admin grant topic": "topic",
	}
)

// completionWait bounds the coordinator call of one completion: a shell
// waits for it, so a coordinator that does not answer costs this, once.
const completionWait = 2 * time.Second

// completeNames registers nameArgs' and nameFlags' completions on cmd and
// every command below it.
func completeNames(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		completeNames(sub)
	}
	path := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	if kinds, ok := nameArgs[path]; ok {
		// `admin group <TAB>`: cobra offers the subcommands (describe,
		// delete) beside these.
		cmd.ValidArgsFunction = func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) >= len(kinds) {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return coordinatorNames(c, kinds[len(args)], toComplete), cobra.ShellCompDirectiveNoFileComp
		}
	}
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		kind, ok := nameFlags[path+" "+f.Name]
		if !ok {
			return
		}
		list := f.Value.Type() == "stringSlice"
		_ = cmd.RegisterFlagCompletionFunc(f.Name, func(c *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if !list {
				return coordinatorNames(c, kind, toComplete), cobra.ShellCompDirectiveNoFileComp
			}
			cut := strings.LastIndexByte(toComplete, ',') + 1
			typed := strings.Split(toComplete[:cut], ",")
			var offers []string
			for _, name := range coordinatorNames(c, kind, toComplete[cut:]) {
				if !slices.Contains(typed, name) {
					offers = append(offers, toComplete[:cut]+name)
				}
			}
			return offers, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
		})
	})
}

// coordinatorNames are the topics or groups (kind) starting with prefix
// that the coordinator lists (the first page: GET /v1/admin/topics or
// /v1/admin/groups), asked with the admin token and coordinator cmd's
// flags and the environment give; none without a token or an answer.
func coordinatorNames(cmd *cobra.Command, kind, prefix string) []string {
	f := &adminFlags{coordinator: envOr("CAPGATE_COORDINATOR_URL", "http://127.0.0.1:7070")}
	for name, dst := range map[string]*string{
		"coordinator": &f.coordinator, "token": &f.token, "token-file": &f.tokenFile,
		"cacert": &f.tls.cacert, "cert": &f.tls.cert, "key": &f.tls.key,
	} {
		if fl := cmd.Flags().Lookup(name); fl != nil {
			*dst = fl.Value.String()
		}
	}
	c, err := f.client()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionWait)
	defer cancel()
	var all []string
	if kind == "topic" {
		var r coordinator.TopicsResponse
		if c.do(ctx, http.MethodGet, "/v1/admin/topics", nil, &r) != nil {
			return nil
		}
		for _, t := range r.Topics {
			all = append(all, t.Topic)
		}
	} else {
		var r coordinator.GroupsResponse
		if c.do(ctx, http.MethodGet, "/v1/admin/groups", nil, &r) != nil {
			return nil
		}
		all = r.Groups
	}
	var out []string
	for _, name := range all {
		// Into the shell's completion list: a name the API would never
		// hand out (a space, a control character) is not offered.
		if strings.HasPrefix(name, prefix) && !strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r > '~' }) {
			out = append(out, name)
		}
	}
	return out
}
