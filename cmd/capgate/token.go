package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/coordinators"
	"github.com/capgate/capgate/ocap"
)

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Inspect capgate tokens"}
	cmd.AddCommand(newTokenInspect())
	return cmd
}

type inspectFlags struct {
	jwks, kind, issuer, audience string
	maxLease                     time.Duration
	tls                          tlsFlags
}

func newTokenInspect() *cobra.Command {
	var f inspectFlags
	cmd := &cobra.Command{
		Use:   "inspect TOKEN|-",
		Short: "Decode a token and, with --jwks, verify it strictly",
		Long: "Prints the header and claims of a token. With --jwks (a URL such as\n" +
			"http://127.0.0.1:7070/.well-known/jwks.json, or a file) the token is also\n" +
			"verified with every rule a gateway applies, as the kind its typ header\n" +
			"names (a capability, a client credential or a member token; --kind to\n" +
			"insist on one), and the result is printed; the exit status is then 1\n" +
			"when it does not verify, or when the JWKS could not be read.\n\n" +
			"Without --jwks, when $CAPGATE_COORDINATOR_URL is set (capgate dev's\n" +
			"credentials.env sets it), the token is verified against that\n" +
			"coordinator's JWKS (its first URL's /.well-known/jwks.json); --jwks none\n" +
			"only decodes. Gateways do not serve the JWKS: only coordinators do.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			token, err := readToken(args[0], cmd.InOrStdin())
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("jwks") {
				f.jwks = coordinatorJWKS(os.Getenv("CAPGATE_COORDINATOR_URL"))
			}
			if f.jwks == "none" {
				f.jwks = ""
			}
			return inspect(cmd.Context(), cmd.OutOrStdout(), token, f)
		},
	}
	cmd.Flags().StringVar(&f.jwks, "jwks", "", "JWKS URL or file to verify against, or none (default: $CAPGATE_COORDINATOR_URL's /.well-known/jwks.json when set)")
	cmd.Flags().StringVar(&f.kind, "kind", "", "expected token kind (typ): capgate+jwt, capgate-client+jwt or capgate-member+jwt (default: the token's own typ)")
	cmd.Flags().StringVar(&f.issuer, "issuer", "", "expected iss (default: the token's own)")
	cmd.Flags().StringVar(&f.audience, "audience", "", "expected aud (default: the token's own)")
	cmd.Flags().DurationVar(&f.maxLease, "max-lease", 10*time.Minute, "longest lease accepted for capabilities")
	f.tls.register(cmd.Flags())
	return cmd
}

// coordinatorJWKS is the JWKS URL of the first coordinator in list (the
// form of $CAPGATE_COORDINATOR_URL), "" for none.
func coordinatorJWKS(list string) string {
	urls := coordinators.Split(list)
	if len(urls) == 0 {
		return ""
	}
	return strings.TrimRight(urls[0], "/") + "/.well-known/jwks.json"
}

func readToken(arg string, stdin io.Reader) (string, error) {
	if arg != "-" {
		return strings.TrimSpace(arg), nil
	}
	b, err := io.ReadAll(io.LimitReader(stdin, ocap.MaxTokenBytes+1))
	return strings.TrimSpace(string(b)), err
}

func inspect(ctx context.Context, w io.Writer, token string, f inspectFlags) error {
	parts := strings.Split(token, ".")
	switch {
	case token == "":
		// `capgate token inspect "$X"` with X unset, or `-` with nothing
		// on stdin, said "not a JWT: 1 segments".
		return fmt.Errorf("empty token: nothing to inspect (an unset variable? pass the token, or - to read it from stdin)")
	case len(parts) == 1:
		// The admin and sync tokens are opaque secrets (newuser5 pasted
		// $CAPGATE_ADMIN_TOKEN): say so rather than count segments.
		return fmt.Errorf("not a JWT (header.claims.signature): capgate's admin and sync tokens are opaque secrets with nothing to decode; capabilities, client credentials and member tokens are JWTs")
	case len(parts) != 3:
		return fmt.Errorf("not a JWT: %d dot-separated segments, want 3 (header.claims.signature)", len(parts))
	}
	var header, claims map[string]any
	for i, dst := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return fmt.Errorf("segment %d: %w", i+1, err)
		}
		if err := json.Unmarshal(b, dst); err != nil {
			return fmt.Errorf("segment %d: %w", i+1, err)
		}
	}
	out := map[string]any{"header": header, "claims": claims}
	if exp, ok := claims["exp"].(float64); ok {
		out["expires_at"] = time.Unix(int64(exp), 0).UTC().Format(time.RFC3339)
	}
	var verifyErr, jwksErr error
	if f.jwks != "" {
		var keys map[string]ed25519.PublicKey
		if keys, jwksErr = jwksKeys(ctx, f); jwksErr != nil {
			out["jwks_error"] = jwksErr.Error()
		} else {
			verifyErr = verifyWith(token, header, claims, keys, f)
			out["jwks"], out["verified"] = f.jwks, verifyErr == nil
			if verifyErr != nil {
				out["verify_error"] = verifyErr.Error()
			}
		}
	}
	if err := printJSON(w, out); err != nil { // a token's claims are anyone's text
		return err
	}
	// The decoded token is printed; the exit status says it was not
	// verified, and why: the token, or the JWKS it was checked against.
	switch {
	case jwksErr != nil:
		return fmt.Errorf("token not verified: %w", jwksErr)
	case verifyErr != nil:
		return fmt.Errorf("token did not verify: %w", verifyErr)
	}
	return nil
}

// jwksKeys reads the keys of --jwks (a URL or a file).
func jwksKeys(ctx context.Context, f inspectFlags) (map[string]ed25519.PublicKey, error) {
	hc, err := f.tls.httpClient(10 * time.Second)
	if err != nil {
		return nil, err
	}
	set, err := loadJWKS(ctx, hc, f.jwks)
	if err != nil {
		return nil, err
	}
	keys, err := ocap.ImportJWKS(set)
	if err != nil {
		return nil, fmt.Errorf("the JWKS %s: %w", f.jwks, err)
	}
	return keys, nil
}

// inspectKind is the kind to verify as: --kind, else the token's typ when
// it is a capgate kind, else a capability (and the verifier says what
// the typ is instead).
func inspectKind(header map[string]any, f inspectFlags) ocap.Kind {
	if f.kind != "" {
		return ocap.Kind(f.kind)
	}
	typ, _ := header["typ"].(string)
	switch k := ocap.Kind(typ); k {
	case ocap.KindCapability, ocap.KindClient, ocap.KindMember:
		return k
	}
	return ocap.KindCapability
}

func verifyWith(token string, header, claims map[string]any, keys map[string]ed25519.PublicKey, f inspectFlags) error {
	iss, aud := f.issuer, f.audience
	if iss == "" {
		iss, _ = claims["iss"].(string)
	}
	if aud == "" {
		aud, _ = claims["aud"].(string)
	}
	switch {
	case iss == "":
		return errors.New("the token names no issuer (iss); pass the coordinator's id with --issuer")
	case aud == "":
		return errors.New("the token names no audience (aud); pass the cluster with --audience")
	}
	v, err := ocap.NewVerifier(ocap.VerifierConfig{Issuer: iss, Audience: aud, Leeway: ocap.MaxLeeway, MaxLease: f.maxLease})
	if err != nil {
		return err
	}
	v.SetKeys(keys)
	_, err = v.Verify(token, inspectKind(header, f), time.Now())
	return err
}

func loadJWKS(ctx context.Context, hc *http.Client, src string) (api.JWKS, error) {
	var set api.JWKS
	var body []byte
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
		if err != nil {
			return set, fmt.Errorf("fetching the JWKS failed: %w", err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return set, fmt.Errorf("fetching the JWKS failed: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return set, fmt.Errorf("fetching the JWKS failed: GET %s: %s", src, resp.Status)
		}
		body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return set, fmt.Errorf("fetching the JWKS failed: GET %s: %w", src, err)
		}
	} else {
		b, err := os.ReadFile(src)
		if err != nil {
			return set, fmt.Errorf("reading the JWKS failed: %w", err)
		}
		body = b
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return set, fmt.Errorf("the JWKS %s is not a JWK set: %w", src, err)
	}
	return set, nil
}
