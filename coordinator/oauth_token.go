package coordinator

// Behavior: POST /oauth/token — the OAuth2 token endpoint, client
// credentials grant only (RFC 6749 §4.4). The body is
// application/x-www-form-urlencoded: grant_type=client_credentials and an
// optional scope (space-separated group:<pattern> / topic:<pattern> items
// that narrow what the client may join). The client authenticates with
// HTTP Basic (client_secret_basic: id and secret form-encoded, RFC 6749
// §2.3.1) or with client_id and client_secret in the body
// (client_secret_post), never both. The answer is a capgate client
// credential as a bearer access token:
//   200 {"access_token","token_type":"Bearer","expires_in","scope"}
// with Cache-Control: no-store. Refusals are RFC 6749 §5.2 bodies
// {"error","error_description"}:
//   400 invalid_request (malformed body, two client authentications,
//       no grant_type), unsupported_grant_type, invalid_scope (a scope
//       item not within the client's, or a credential that would be
//       larger than the token size cap — a scope naming too much, or,
//       without a scope, a client registered before registrations were
//       checked against the cap: RFC 6749 §3.3's default scope refused;
//       never a 500)
//   401 invalid_client — unknown client, wrong secret and revoked client
//       alike, with the same work done for each (a dummy comparison for an
//       unknown id), and WWW-Authenticate: Basic when Basic was used
//   429 temporarily_unavailable with Retry-After — a failed
//       authentication past oauth.max_failures from this address (IPv6:
//       its /64) within oauth.failure_window (refilled evenly). The
//       secret is checked first: the right secret of a live client is
//       never throttled, whatever anyone sent before it, from anywhere
//       (client ids are not secret: they are the sub of every credential
//       a client holds, so a lockout keyed on them let anyone deny the
//       client its tokens); only failures are limited (oauth_limit.go)
//   500 server_error — the credential could not be minted (not for its
//       size: 400 above) or recorded (it is not handed out)
// Every credential is recorded (jti, exp) with its client, so revoking
// the client denies them; a client with oauth.live_tokens_max credentials
// alive gets 429 temporarily_unavailable until one expires. The
// credential's sub is "oauth:<client_id>".

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/ocap"
)

// OAuthConfig configures the token endpoint and its clients.
type OAuthConfig struct {
	// TokenTTL is the default lifetime of the credentials it issues (a
	// client may set its own, at most client_credential_ttl_max).
	TokenTTL time.Duration `yaml:"token_ttl"`
	// ClientsMax bounds the registered clients.
	ClientsMax int `yaml:"clients_max"`
	// LiveTokensMax bounds the credentials one client has alive at once
	// (each is recorded so that revoking the client denies it).
	LiveTokensMax int `yaml:"live_tokens_max"`
	// MaxFailures failed client authentications per source address
	// (IPv6: per /64) are answered 401 within FailureWindow (refilled
	// evenly); failures past them are 429. The right secret is never
	// refused for anyone's failures (oauth_limit.go).
	MaxFailures   int           `yaml:"max_failures"`
	FailureWindow time.Duration `yaml:"failure_window"`
	// LimiterEntries bounds the addresses tracked; past it new ones
	// share one budget of MaxFailures.
	LimiterEntries int `yaml:"limiter_entries"`
}

// DefaultOAuthConfig returns the documented defaults.
func DefaultOAuthConfig() OAuthConfig {
	return OAuthConfig{TokenTTL: time.Hour, ClientsMax: 10000, LiveTokensMax: 1000,
		MaxFailures: 5, FailureWindow: time.Minute, LimiterEntries: 10000}
}

// Validate names the first bad field.
func (c OAuthConfig) Validate() error {
	switch {
	case c.TokenTTL < time.Second:
		return fmt.Errorf("oauth.token_ttl: must be >= 1s, got %s", c.TokenTTL)
	case c.ClientsMax <= 0 || c.LiveTokensMax <= 0 || c.LimiterEntries <= 0:
		return fmt.Errorf("oauth.clients_max, live_tokens_max, limiter_entries: must be > 0, got %d, %d, %d", c.ClientsMax, c.LiveTokensMax, c.LimiterEntries)
	case c.MaxFailures <= 0:
		return fmt.Errorf("oauth.max_failures: must be > 0, got %d", c.MaxFailures)
	case c.FailureWindow <= 0:
		return fmt.Errorf("oauth.failure_window: must be > 0, got %s", c.FailureWindow)
	}
	return nil
}

// oauthError is an OAuth2 error code (RFC 6749 §5.2) of the token
// endpoint; like api.Code, each has one status (oauthStatus).
type oauthError string

const (
	oauthInvalidRequest       oauthError = "invalid_request"
	oauthInvalidClient        oauthError = "invalid_client"
	oauthUnsupportedGrantType oauthError = "unsupported_grant_type"
	oauthInvalidScope         oauthError = "invalid_scope"
	oauthSlowDown             oauthError = "temporarily_unavailable" // rate limits; Retry-After
	oauthServerError          oauthError = "server_error"
)

var oauthStatus = map[oauthError]int{
	oauthInvalidRequest: 400, oauthUnsupportedGrantType: 400, oauthInvalidScope: 400,
	oauthInvalidClient: 401, oauthSlowDown: 429, oauthServerError: 500,
}

// OAuthErrorStatus is the status of an OAuth2 error code of the token
// endpoint (false for a code it never answers).
func OAuthErrorStatus(code string) (int, bool) {
	s, ok := oauthStatus[oauthError(code)]
	return s, ok
}

// OAuthTokenResponse is a successful token answer (RFC 6749 §5.1).
type OAuthTokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope,omitempty"`
}

// OAuthError is a refusal (RFC 6749 §5.2).
type OAuthError struct {
	Error       oauthError `json:"error"`
	Description string     `json:"error_description,omitempty"`
}

// tokenRequest is the parsed, authenticated-to-be request.
type tokenRequest struct {
	clientID, secret, scope string
	basic                   bool
}

func (c *Coordinator) handleOAuthToken(ctx *fasthttp.RequestCtx, _ []string) {
	req, ok := parseTokenRequest(ctx)
	if !ok {
		return
	}
	now := c.now()
	c.oauth.mu.Lock()
	o := c.oauth.clients[req.clientID]
	if !secretMatches(o, req.secret) || o.RevokedAt != 0 {
		c.oauth.mu.Unlock()
		c.refuseOAuthClient(ctx, req, now)
		return
	}
	issuing := c.oauth.issueLock(o.ID)
	c.oauth.mu.Unlock()
	issuing.Lock()
	defer issuing.Unlock()
	if c.revokedOAuthSubject(oauthSubject + o.ID) { // revoked while this request waited
		c.refuseOAuthClient(ctx, req, now)
		return
	}
	groups, topics, ok := oauthScope(o, req.scope) // o's lists are never changed
	if !ok {
		writeOAuthError(ctx, oauthInvalidScope, "scope items are group:<pattern> or topic:<pattern> within the client's own (with produce: an exact topic only if the client names it exactly)", false)
		return
	}
	c.issueOAuthToken(ctx, o, groups, topics, req.scope, now)
}

// issueOAuthToken mints, records and answers one credential for o (its
// issuing lock held, not c.oauth.mu: the record is written without it).
func (c *Coordinator) issueOAuthToken(ctx *fasthttp.RequestCtx, o *oauthClient, groups, topics []string, scope string, now time.Time) {
	c.oauth.mu.Lock()
	live := slices.Clone(o.live(now))
	ttlMs := o.TokenTTLMs
	updated := *o
	c.oauth.mu.Unlock()
	if len(live) >= c.cfg.OAuth.LiveTokensMax {
		c.oauth.refusals.WithLabelValues(oauthRefusedLiveMax).Inc()
		ctx.Response.Header.Set("Retry-After", "60")
		writeOAuthError(ctx, oauthSlowDown, fmt.Sprintf("this client has %d credentials alive (oauth.live_tokens_max); reuse one", len(live)), false)
		return
	}
	ttl := min(msDuration(ttlMs), c.cfg.ClientCredentialTTLMax)
	token, claims, err := c.keys.minter.Mint(ocap.KindClient, o.credentialClaims(groups, topics), now, ttl)
	if errors.Is(err, ocap.ErrTooLarge) {
		writeOAuthError(ctx, oauthInvalidScope, tooLargeScope(err, scope), false)
		return
	}
	if err != nil {
		writeOAuthError(ctx, oauthServerError, "mint: "+err.Error(), false)
		return
	}
	updated.Issued = append(live, issuedToken{JTI: claims.ID, Exp: int64(claims.ExpiresAt)})
	if err := c.saveOAuthClient(&updated); err != nil {
		writeOAuthError(ctx, oauthServerError, "record the credential: "+err.Error(), false)
		return
	}
	c.oauth.mu.Lock()
	*o = updated
	c.oauth.mu.Unlock()
	b, _ := json.Marshal(OAuthTokenResponse{AccessToken: token, TokenType: "Bearer", ExpiresIn: int64(claims.ExpiresAt) - now.Unix(), Scope: scope})
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.Response.Header.Set("Pragma", "no-cache")
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// tooLargeScope words a credential over the token size cap: the scope
// asked for (RFC 6749 §3.3: without one, the client's whole registration,
// which a client registered before registrations were checked against
// the cap may exceed) is what must narrow.
func tooLargeScope(err error, scope string) string {
	what := "the scope asked for"
	if scope == "" {
		what = "this client's groups and topics (no scope asked for)"
	}
	return fmt.Sprintf("the credential for %s would be %s (the token size cap): ask for a narrower scope "+
		"(fewer or shorter group:<pattern> and topic:<pattern> items), or have an administrator register the client again with fewer or shorter patterns",
		what, tooLargeText(err))
}

// dummySecretHash stands in for an unknown client's, so an unknown id
// costs the same comparison as a wrong secret.
var dummySecretHash = HashSecret("capgate: no such client")

// secretMatches compares secret with o's stored hash in constant time
// (an unknown client is compared against a dummy and fails).
func secretMatches(o *oauthClient, secret string) bool {
	want := dummySecretHash
	if o != nil {
		want = o.SecretHash
	}
	wantSum, err := hex.DecodeString(want)
	sum := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(sum[:], wantSum) == 1 && err == nil && o != nil
}

// parseTokenRequest reads the form and the client authentication; on a
// refusal it answers and returns false.
func parseTokenRequest(ctx *fasthttp.RequestCtx) (tokenRequest, bool) {
	bad := func(code oauthError, msg string) (tokenRequest, bool) {
		writeOAuthError(ctx, code, msg, false)
		return tokenRequest{}, false
	}
	if ct := ctx.Request.Header.ContentType(); !bytes.HasPrefix(ct, []byte("application/x-www-form-urlencoded")) {
		return bad(oauthInvalidRequest, "Content-Type must be application/x-www-form-urlencoded")
	}
	form, err := url.ParseQuery(string(ctx.PostBody()))
	if err != nil {
		return bad(oauthInvalidRequest, "malformed form body")
	}
	for name, values := range form {
		if len(values) > 1 {
			return bad(oauthInvalidRequest, "parameter "+name+" repeated")
		}
	}
	switch form.Get("grant_type") {
	case "":
		return bad(oauthInvalidRequest, "grant_type required")
	case "client_credentials":
	default:
		return bad(oauthUnsupportedGrantType, "only grant_type=client_credentials")
	}
	req := tokenRequest{clientID: form.Get("client_id"), secret: form.Get("client_secret"), scope: form.Get("scope")}
	if auth := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization); len(auth) > 0 {
		if req.clientID != "" || req.secret != "" {
			return bad(oauthInvalidRequest, "authenticate the client once: Basic or the body, not both")
		}
		id, secret, ok := basicCredentials(string(auth))
		if !ok {
			writeOAuthError(ctx, oauthInvalidClient, "malformed Basic authorization", true)
			return tokenRequest{}, false
		}
		req.clientID, req.secret, req.basic = id, secret, true
	}
	if req.clientID == "" || req.secret == "" {
		writeOAuthError(ctx, oauthInvalidClient, "client authentication required", req.basic)
		return tokenRequest{}, false
	}
	return req, true
}

// basicCredentials decodes "Basic base64(urlenc(id):urlenc(secret))"
// (RFC 6749 §2.3.1).
func basicCredentials(header string) (id, secret string, ok bool) {
	const scheme = "basic "
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(header[len(scheme):]))
	if err != nil {
		return "", "", false
	}
	rawID, rawSecret, found := strings.Cut(string(raw), ":")
	if !found {
		return "", "", false
	}
	if id, err = url.QueryUnescape(rawID); err != nil {
		return "", "", false
	}
	if secret, err = url.QueryUnescape(rawSecret); err != nil {
		return "", "", false
	}
	return id, secret, true
}

func writeOAuthError(ctx *fasthttp.RequestCtx, code oauthError, description string, basic bool) {
	status := oauthStatus[code]
	if basic && status == fasthttp.StatusUnauthorized {
		ctx.Response.Header.Set("WWW-Authenticate", `Basic realm="capgate"`)
	}
	b, _ := json.Marshal(OAuthError{Error: code, Description: description})
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}
