package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/internal/coordinators"
	"github.com/capgate/capgate/ocap"
)

// adminClient talks to the coordinator's admin API.
type adminClient struct {
	base  string
	urls  []string // every --coordinator URL, normalized
	token string
	http  *http.Client
	// notice, when set (the command's stderr), hears once per request
	// that it is being retried, and why (retryNotice).
	notice io.Writer
}

type adminFlags struct {
	coordinator string
	token       string
	tokenFile   string
	tls         tlsFlags
	out         outputFlag
	cmd         *cobra.Command // the admin command: its stderr hears retries
}

func (f *adminFlags) register(cmd *cobra.Command) {
	f.cmd = cmd
	cmd.PersistentFlags().StringVar(&f.coordinator, "coordinator", envOr("CAPGATE_COORDINATOR_URL", "http://127.0.0.1:7070"), coordinatorHelp)
	cmd.PersistentFlags().StringVar(&f.token, "token", "", "admin token ($CAPGATE_ADMIN_TOKEN); prefer --token-file")
	cmd.PersistentFlags().StringVar(&f.tokenFile, "token-file", "", "file holding the admin token, or credentials.json (or .env) from capgate dev")
	f.tls.register(cmd.PersistentFlags())
	f.out.register(cmd.PersistentFlags())
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// adminTimeout bounds an admin request; a coordinator answers at once,
// a revoke within its gateway_timeout (15 s).
var adminTimeout = 60 * time.Second

func (f *adminFlags) client() (*adminClient, error) {
	tok, err := secretFrom(f.token, f.tokenFile, "CAPGATE_ADMIN_TOKEN", "admin_token")
	if err != nil {
		return nil, err
	}
	hc, err := f.tls.httpClient(adminTimeout)
	if err != nil {
		return nil, err
	}
	c, err := newAdminClient(f.coordinator, tok, hc)
	if err == nil && f.cmd != nil {
		c.notice = f.cmd.ErrOrStderr()
	}
	return c, err
}

// secretAliases are the older names a secret's key had in files the CLI
// wrote, still read: `admin client-credential` printed "credential"
// before it printed "client_credential" as credentials.json holds it.
var secretAliases = map[string][]string{"client_credential": {"credential"}}

// secretFrom reads a secret from a flag, a file (plain, a JSON object
// holding key, as capgate dev's credentials.json, or shell lines setting
// env, as its credentials.env) or an environment variable.
func secretFrom(flagValue, file, env, key string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		var m map[string]any
		if json.Unmarshal(b, &m) == nil {
			for _, k := range append([]string{key}, secretAliases[key]...) {
				if v, _ := m[k].(string); v != "" {
					return v, nil
				}
			}
			return "", fmt.Errorf("%s holds no %q", file, key)
		}
		secret := strings.TrimSpace(string(b))
		if strings.ContainsAny(secret, " \t\r\n") {
			// credentials.env given as the file: its whole text went out as
			// the token and came back "invalid header field value for
			// Authorization" (newuser5).
			return envFileSecret(file, secret, env)
		}
		return secret, nil
	}
	if v := os.Getenv(env); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("no %s: pass --token, --token-file or set %s%s", key, env, devCredentialsHere("--token-file"))
}

// devDataDir is capgate dev's default --data-dir.
const devDataDir = "capgate-data"

// devCredentialsHere points at capgate dev's credentials when they are in
// the working directory: a new user in another terminal, before sourcing
// credentials.env (or in a new shell), read "no client credential: pass
// --credential-file …" with the file beside them (newuser7). "" when it
// is not there.
func devCredentialsHere(flag string) string {
	file := filepath.Join(devDataDir, "credentials.json")
	if _, err := os.Stat(file); err != nil {
		return ""
	}
	return fmt.Sprintf("; capgate dev's are here: %s %s, or run . ./%s/credentials.env first", flag, file, devDataDir)
}

// envFileSecret is env's value in text, shell lines such as capgate dev's
// credentials.env ("export NAME=value"), or an error saying what the file
// is not.
func envFileSecret(file, text, env string) (string, error) {
	for _, line := range strings.Split(text, "\n") {
		name, value, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "=")
		if ok && name == env {
			if unquoted, err := strconv.Unquote(value); err == nil {
				value = unquoted
			}
			if value = strings.Trim(value, "'"); value != "" {
				return value, nil
			}
		}
	}
	return "", fmt.Errorf("%s is not a token (it holds spaces or several lines) and sets no %s: pass a file holding the token alone, or capgate dev's credentials.json", file, env)
}

// do sends body (nil for none) and decodes a JSON answer into out (may be
// nil). Error bodies are turned into *api.Error. A request that provably
// did not land — every replica answered not_leader naming no leader to
// follow (an election under way), or none could be connected to — is
// sent again, whatever its method, and one that may have landed (a 5xx,
// a connection broken after sending) only when its method is idempotent
// (GET, PUT, DELETE), with a backoff, for at most adminRetry's budget
// (coordinators.Retry). When it gives up, the error says what happened.
func (c *adminClient) do(ctx context.Context, method, path string, body, out any) error {
	var payload []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		payload = b
	}
	retry := adminRetry
	for {
		resp, b, err := c.send(ctx, method, path, payload)
		wait, again := retry.Next(time.Now(), method, c.outcome(ctx, resp, b, err))
		if !again {
			what := retry.GaveUp(time.Now(), method)
			if resp != nil && resp.StatusCode == http.StatusMisdirectedRequest {
				if leader := c.unlistedLeader(resp, b); leader != "" {
					what = fmt.Sprintf("the leader it names, %s, is not among --coordinator's URLs, so it is not followed: add it (--coordinator %s,%s)", leader, strings.Join(c.urls, ","), leader)
				}
			}
			return gaveUp(c.answer(ctx, method, path, resp, b, err, out), what)
		}
		if retry.Attempts() == 1 {
			c.retryNotice(ctx, method, path, resp, b, err, retry.Budget)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return gaveUp(c.answer(ctx, method, path, resp, b, err, out), retry.GaveUp(time.Now(), method))
		}
	}
}

// retryNotice tells the user, at a request's first retry, what went
// wrong and that it is being retried for up to budget: a coordinator
// not running (or --coordinator pointing nowhere) kept a command silent
// for the whole budget (15 s) before its error said so (newuser14).
func (c *adminClient) retryNotice(ctx context.Context, method, path string, resp *http.Response, b []byte, err error, budget time.Duration) {
	if c.notice == nil {
		return
	}
	why := c.answer(ctx, method, path, resp, b, err, nil)
	fmt.Fprintf(c.notice, "capgate: %v; retrying for up to %s, in case it is restarting or electing a leader (Ctrl-C to stop)\n", why, budget)
}

// adminRetry bounds the admin client's retries (a variable: tests
// shorten it).
var adminRetry = coordinators.DefaultRetry()

// outcome classifies one attempt for the retry policy. A 421 naming a
// leader outside --coordinator is an answer: the transport does not
// follow it (a token only goes where the user said) and waiting will
// not change that — the message names it (unlistedLeader).
func (c *adminClient) outcome(ctx context.Context, resp *http.Response, body []byte, err error) coordinators.Outcome {
	switch {
	case ctx.Err() != nil:
		return coordinators.Answered // the caller gave up: nothing more to send
	case err != nil && client.Unsent(err):
		return coordinators.Unsent
	case err != nil, resp.StatusCode >= 500:
		return coordinators.Unavailable
	case resp.StatusCode == http.StatusMisdirectedRequest && c.unlistedLeader(resp, body) == "":
		return coordinators.NoLeader
	}
	return coordinators.Answered
}

// unlistedLeader is the leader a 421 names when it is none of the
// --coordinator URLs, else "".
func (c *adminClient) unlistedLeader(resp *http.Response, body []byte) string {
	var eb api.ErrorBody
	_ = json.Unmarshal(body, &eb)
	leader, err := coordinators.Normalize(api.LeaderOf(resp.Header.Get(api.HeaderLeader), eb.Error))
	if err != nil || slices.Contains(c.urls, leader) {
		return ""
	}
	return leader
}

// gaveUp adds to err what the retries did ("" adds nothing).
func gaveUp(err error, what string) error {
	if err == nil || what == "" {
		return err
	}
	return fmt.Errorf("%w (%s)", err, what)
}

// send is one attempt: the answer's status and body (at most 64 MiB).
func (c *adminClient) send(ctx context.Context, method, path string, payload []byte) (*http.Response, []byte, error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if payload != nil {
		req.Header.Set("Content-Type", api.MediaJSON)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp, b, err
}

// answer turns one attempt into do's result: err as the user reads it,
// a refusal as *api.Error, a success decoded into out.
func (c *adminClient) answer(ctx context.Context, method, path string, resp *http.Response, b []byte, err error, out any) error {
	if resp == nil {
		return connectHint(ctx, c.base, adminTimeout, err)
	}
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var eb api.ErrorBody
		if json.Unmarshal(b, &eb) == nil && eb.Error.Code != "" {
			// The message is the server's text, printed on a terminal.
			eb.Error.Code, eb.Error.Message = api.Code(escapeUnsafe(string(eb.Error.Code))), escapeUnsafe(eb.Error.Message)
			if eb.Error.Code == api.CodeNotFound && strings.HasPrefix(eb.Error.Message, "no such route") {
				// Not a coordinator's API at that base: a gateway, or a URL
				// with a path (--coordinator http://host:7070/v1). The
				// server's own hint (after "; ") asks about its base URL
				// from its side — a gateway's "is the URL a gateway's base
				// URL?" — so only the route is kept and this one question
				// asked.
				route, hint, _ := strings.Cut(eb.Error.Message, "; ")
				eb.Error.Message = route
				if strings.Contains(hint, "not a gateway's") {
					// A gateway said so: the URL is known, not guessed at
					// (newuser12: "is it a capgate coordinator?" when the
					// answer said what it was).
					return fmt.Errorf("%s %s%s: %d %w: %s is a capgate gateway, not the coordinator: --coordinator takes the coordinator's base URL (capgate dev: http://127.0.0.1:7070; a gateway's coordinator_url names it)",
						method, c.base, path, resp.StatusCode, &eb.Error, c.base)
				}
				return fmt.Errorf("%s %s%s: %d %w: is %s a capgate coordinator? --coordinator takes its base URL, e.g. http://127.0.0.1:7070",
					method, c.base, path, resp.StatusCode, &eb.Error, c.base)
			}
			return fmt.Errorf("%s %s: %d %w", method, path, resp.StatusCode, &eb.Error)
		}
		if strings.Contains(string(b), "HTTP request to an HTTPS server") {
			// Go's TLS servers answer a plaintext request so.
			return fmt.Errorf("%s %s%s: %s (the server speaks TLS: use https://)", method, c.base, path, escapeUnsafe(resp.Status))
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, escapeUnsafe(resp.Status), escapeUnsafe(string(b[:min(len(b), 200)])))
	}
	if out != nil && len(b) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}

// printJSON prints v indented, with no rune a terminal would obey
// (jsonTerminalSafe): it is often read on one.
func printJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(jsonTerminalSafe(b.Bytes()))
	return err
}

// renderer prints an answer as tables.
type renderer func(w io.Writer, answer json.RawMessage) error

// call is the shape of most admin subcommands: send, print the answer
// (JSON, or tables laid out by printAny).
func call(cmd *cobra.Command, f *adminFlags, method, path string, body any) error {
	return callRender(cmd, f, method, path, body, printAny)
}

// callRender is call with the answer's own table layout.
func callRender(cmd *cobra.Command, f *adminFlags, method, path string, body any, render renderer) error {
	c, err := f.client()
	if err != nil {
		return err
	}
	var out json.RawMessage
	if err := c.do(cmd.Context(), method, path, body, &out); err != nil {
		return err
	}
	return f.print(cmd.OutOrStdout(), out, render)
}

// print writes an answer as --output asks.
func (f *adminFlags) print(w io.Writer, out json.RawMessage, render renderer) error {
	if len(out) == 0 {
		_, err := fmt.Fprintln(w, "ok")
		return err
	}
	if !f.out.document(w) {
		return render(w, out)
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		return err
	}
	return f.out.print(w, v)
}

func partitionPath(group, topic, partition string) (string, error) {
	if err := groupArg(group); err != nil {
		return "", err
	}
	if err := topicArg(topic); err != nil {
		return "", err
	}
	p, err := strconv.ParseInt(partition, 10, 32)
	if err != nil || p < 0 {
		return "", usageErrorf("partition %q: want a number ≥ 0", partition)
	}
	return "/v1/admin/groups/" + url.PathEscape(group) + "/partitions/" + url.PathEscape(topic) + "/" + strconv.FormatInt(p, 10), nil
}

func newAdminCmd() *cobra.Command {
	f := &adminFlags{}
	cmd := &cobra.Command{Use: "admin", Short: "Operate a coordinator through its admin API"}
	f.register(cmd)
	cmd.AddCommand(
		newAdminGroups(f),
		newAdminGroup(f), newAdminOffsets(f), newAdminTopics(f), newAdminTopic(f), newAdminAudit(f),
		adminGetRender(f, "gateways", "List gateways with their acked sync seq and last poll", func([]string) string { return "/v1/admin/gateways" }, 0, printGateways),
		newAdminRevoke(f), newAdminLease(f), newAdminGrant(f), newAdminRevokeCapability(f),
		newAdminRevokeMember(f), newAdminQoS(f), newAdminConfig(f), newAdminClientCredential(f), newAdminRotateKeys(f),
		newAdminOAuthClient(f),
	)
	return cmd
}

func adminGet(f *adminFlags, use, short string, path func([]string) string, nargs int) *cobra.Command {
	return adminGetRender(f, use, short, path, nargs, printAny)
}

func adminGetRender(f *adminFlags, use, short string, path func([]string) string, nargs int, render renderer) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(nargs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callRender(cmd, f, http.MethodGet, path(args), nil, render)
		},
	}
}

// topicArg refuses a TOPIC argument no Kafka topic has, as a usage error
// that says the rule: an empty one or one with '/' went out as another
// route and came back 404 "is URL a capgate coordinator?" (newuser4 #4).
func topicArg(topic string) error {
	if !ocap.ValidTopic(topic) {
		return usageErrorf("topic %q: a topic is %s", topic, ocap.TopicRule)
	}
	return nil
}

// memberArg refuses a MEMBER argument no member id has (the
// coordinator's rule: printable ASCII without '/', not "." or ".."), as a
// usage error pointing at where the ids are listed.
func memberArg(group, member string) error {
	ok := member != "" && member != "." && member != ".."
	for i := 0; ok && i < len(member); i++ {
		ok = member[i] > ' ' && member[i] <= '~' && member[i] != '/'
	}
	if !ok {
		return usageErrorf("member id %q: a member id is printable ASCII without space or '/' (capgate admin group %s lists the members)", member, group)
	}
	return nil
}

// jtiArg refuses a JTI argument that is no jti (the coordinator's rule:
// 128 bits, base64url), as a usage error saying where the jti is: an
// empty one went out as another route (404 "is URL a capgate
// coordinator?"), and a whole token pasted in its place came back 400
// "jti must be 128 bits, base64url" (newuser4 #4).
func jtiArg(jti string) error {
	if b, err := base64.RawURLEncoding.DecodeString(jti); err == nil && len(b) == 16 {
		return nil
	}
	where := "capgate token inspect TOKEN shows a token's jti; a member's credential is members[].credential.id of capgate admin group G -o json"
	if strings.Count(jti, ".") == 2 {
		return usageErrorf("JTI: that is a whole token, not its id (jti): %s", where)
	}
	return usageErrorf("JTI %.40q: a jti is 22 base64url characters (128 bits): %s", jti, where)
}
