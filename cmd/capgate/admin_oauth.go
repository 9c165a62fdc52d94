package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/ocap"
)

// newAdminOAuthClient is `capgate admin oauth-client create|list|revoke`:
// the clients of the coordinator's OAuth2 token endpoint.
func newAdminOAuthClient(f *adminFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "oauth-client", Short: "Clients of the OAuth2 token endpoint (POST /oauth/token)"}
	var name string
	var groups, topics, ops []string
	ttl := &ttlFlag{name: "token-ttl", field: "token_ttl_ms", min: time.Second, zero: "the coordinator's oauth.token_ttl", lasts: "a credential"}
	create := &cobra.Command{
		Use:   "create --name svc --groups g1,prefix-* --topics t1",
		Short: "Register a client; prints its client_id and client_secret (shown once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" || len(groups) == 0 || len(topics) == 0 {
				return usageErrorf("--name, --groups and --topics must not be empty (see %s --help)", cmd.CommandPath())
			}
			if err := ttl.check(); err != nil {
				return err
			}
			if err := opsArg(ops, ocap.ParseClientOps); err != nil {
				return err
			}
			body := map[string]any{"name": name, "groups": groups, "topics": topics, "token_ttl_ms": ttl.ms()}
			if len(ops) > 0 {
				body["ops"] = ops
			}
			return ttl.refused(call(cmd, f, http.MethodPost, "/v1/admin/oauth/clients", body))
		},
	}
	create.Flags().StringVar(&name, "name", "", "client name")
	create.Flags().StringSliceVar(&groups, "groups", nil, "groups its credentials may join (exact, * or prefix*)")
	create.Flags().StringSliceVar(&topics, "topics", nil, "topics they may subscribe to (exact, * or prefix*)")
	for _, required := range []string{"name", "groups", "topics"} { // each missing one named, with the command's --help
		create.MarkFlagRequired(required)
	}
	create.Flags().StringSliceVar(&ops, "ops", nil, "what its credentials allow: consume (join groups, read through them; required) and produce (write to the topics named exactly, over HTTP and through the Kafka listener); default consume")
	newTTLFlag(create.Flags(), ttl, 0, "lifetime of each credential it obtains (at least 1s, at most the coordinator's client_credential_ttl_max; 0: its oauth.token_ttl)")
	cmd.AddCommand(create,
		adminGetRender(f, "list", "List the clients (no secrets)", func([]string) string { return "/v1/admin/oauth/clients" }, 0, printOAuthClients),
		&cobra.Command{
			Use:   "revoke CLIENT_ID",
			Short: "Revoke a client: no more tokens, and its live credentials are denied",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return call(cmd, f, http.MethodPost, "/v1/admin/oauth/clients/"+url.PathEscape(args[0])+"/revoke", nil)
			},
		})
	return cmd
}

// printOAuthClients is `oauth-client list` as a table, its headers also
// when there is no client (as rpk's lists), the token lifetime in Go's
// units.
func printOAuthClients(w io.Writer, raw json.RawMessage) error {
	r, err := decode[coordinator.OAuthClientsResponse](raw)
	if err != nil {
		return err
	}
	rows := make([][]string, len(r.Clients))
	for i, c := range r.Clients {
		ttl := "-" // the coordinator's oauth.token_ttl
		if c.TokenTTLMs > 0 {
			ttl = msText(c.TokenTTLMs)
		}
		rows[i] = []string{c.ClientID, c.Name, cellText(strings.Join(c.Groups, ",")), cellText(strings.Join(c.Topics, ",")),
			cellText(strings.Join(c.Ops, ",")), ttl, strconv.Itoa(c.LiveTokens), cellText(c.Created), cellText(c.RevokedAt)}
	}
	return printTable(w, []string{"CLIENT-ID", "NAME", "GROUPS", "TOPICS", "OPS", "TOKEN-TTL", "LIVE-TOKENS", "CREATED", "REVOKED-AT"}, rows)
}
