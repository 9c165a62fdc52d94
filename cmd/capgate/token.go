package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/api"
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
			"verified with every rule a gateway applies, and the result is printed;\n" +
			"the exit status is then 1 when it does not verify.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			token, err := readToken(args[0], cmd.InOrStdin())
			if err != nil {
				return err
			}
			return inspect(cmd.Context(), cmd.OutOrStdout(), token, f)
		},
	}
	cmd.Flags().StringVar(&f.jwks, "jwks", "", "JWKS URL or file to verify against")
	cmd.Flags().StringVar(&f.kind, "kind", string(ocap.KindCapability), "expected token kind (typ)")
	cmd.Flags().StringVar(&f.issuer, "issuer", "", "expected iss (default: the token's own)")
	cmd.Flags().StringVar(&f.audience, "audience", "", "expected aud (default: the token's own)")
	cmd.Flags().DurationVar(&f.maxLease, "max-lease", 10*time.Minute, "longest lease accepted for capabilities")
	f.tls.register(cmd.Flags())
	return cmd
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
	if len(parts) != 3 {
		return fmt.Errorf("not a JWT: %d segments", len(parts))
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
	verified, why := true, ""
	if f.jwks != "" {
		verified, why = verifyWith(ctx, token, claims, f)
		out["verified"], out["verify_error"] = verified, why
	}
	if err := printJSON(w, out); err != nil { // a token's claims are anyone's text
		return err
	}
	if !verified { // the decoded token is printed, and the exit status says it did not verify
		return fmt.Errorf("token did not verify: %s", why)
	}
	return nil
}

func verifyWith(ctx context.Context, token string, claims map[string]any, f inspectFlags) (bool, string) {
	hc, err := f.tls.httpClient(10 * time.Second)
	if err != nil {
		return false, err.Error()
	}
	set, err := loadJWKS(ctx, hc, f.jwks)
	if err != nil {
		return false, err.Error()
	}
	keys, err := ocap.ImportJWKS(set)
	if err != nil {
		return false, err.Error()
	}
	iss, aud := f.issuer, f.audience
	if iss == "" {
		iss, _ = claims["iss"].(string)
	}
	if aud == "" {
		aud, _ = claims["aud"].(string)
	}
	v, err := ocap.NewVerifier(ocap.VerifierConfig{Issuer: iss, Audience: aud, Leeway: ocap.MaxLeeway, MaxLease: f.maxLease})
	if err != nil {
		return false, err.Error()
	}
	v.SetKeys(keys)
	if _, err := v.Verify(token, ocap.Kind(f.kind), time.Now()); err != nil {
		return false, err.Error()
	}
	return true, ""
}

func loadJWKS(ctx context.Context, hc *http.Client, src string) (api.JWKS, error) {
	var set api.JWKS
	var body []byte
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
		if err != nil {
			return set, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return set, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return set, fmt.Errorf("jwks: %s", resp.Status)
		}
		body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return set, err
		}
	} else {
		b, err := os.ReadFile(src)
		if err != nil {
			return set, err
		}
		body = b
	}
	return set, json.Unmarshal(body, &set)
}
