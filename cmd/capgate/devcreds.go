package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/tlsconf"
)

// Files capgate dev keeps in its data directory next to the coordinator's
// and the broker's state.
const (
	credentialsFile    = "credentials.json"
	credentialsEnvFile = "credentials.env"
	devClientName      = "capgate-dev"
	// devCredentialTTL is the client credential's lifetime; a stored one
	// with less than devCredentialRenew left is replaced on start.
	devCredentialTTL   = 30 * 24 * time.Hour
	devCredentialRenew = 24 * time.Hour
)

// devCredentials is credentials.json: every value a string, so that
// secretFrom (--token-file, --credential-file) reads any key of it.
type devCredentials struct {
	AdminToken       string `json:"admin_token"`
	ClientCredential string `json:"client_credential"`
	SyncToken        string `json:"sync_token"`
}

// loadOrMakeCredentials reads dir/credentials.json, or makes fresh admin and
// sync tokens when there is none. The client credential is checked (and
// minted when needed) once the coordinator runs: see ensureClientCredential.
func loadOrMakeCredentials(dir string) (devCredentials, error) {
	var creds devCredentials
	path := filepath.Join(dir, credentialsFile)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return creds, fmt.Errorf("dev: read credentials: %w", err)
	default:
		if err := json.Unmarshal(b, &creds); err != nil {
			return creds, fmt.Errorf("dev: %s: %w", path, err)
		}
	}
	for _, secret := range []*string{&creds.AdminToken, &creds.SyncToken} {
		if *secret != "" {
			continue
		}
		if *secret, _, err = coordinator.GenerateSecret(); err != nil {
			return creds, fmt.Errorf("dev: %w", err)
		}
	}
	return creds, nil
}

// ensureClientCredential keeps the stored client credential when the
// coordinator (whose signing keys live in the data directory) still
// accepts it for long enough, and mints a new one otherwise. It reports
// why it minted ("" when it kept the stored one).
func ensureClientCredential(ctx context.Context, c *coordinator.Coordinator, cfg coordinator.Config, hc *http.Client, coordinatorURL string, creds *devCredentials) (string, error) {
	why := "there was none"
	if creds.ClientCredential != "" {
		if why = clientCredentialProblem(ctx, cfg, hc, coordinatorURL, creds.ClientCredential); why == "" {
			return "", nil
		}
	}
	ttl := min(devCredentialTTL, cfg.ClientCredentialTTLMax)
	token, err := c.MintClientCredential(devClientName, []string{"*"}, []string{"*"}, ttl)
	if err != nil {
		return "", fmt.Errorf("dev: %w", err)
	}
	creds.ClientCredential = token
	return why, nil
}

// clientCredentialProblem verifies token strictly against the
// coordinator's published keys and wants at least devCredentialRenew of
// life left; it says what is wrong ("" when nothing is).
func clientCredentialProblem(ctx context.Context, cfg coordinator.Config, hc *http.Client, coordinatorURL, token string) string {
	set, err := loadJWKS(ctx, hc, coordinatorJWKS(coordinatorURL))
	if err != nil {
		return "the coordinator's keys could not be read: " + err.Error()
	}
	keys, err := ocap.ImportJWKS(set)
	if err != nil {
		return "the coordinator's keys could not be read: " + err.Error()
	}
	v, err := ocap.NewVerifier(ocap.VerifierConfig{Issuer: cfg.ID, Audience: cfg.Cluster, Leeway: cfg.Leeway, MaxLease: cfg.MaxLease, MaxCredentialTTL: cfg.ClientCredentialTTLMax})
	if err != nil {
		return err.Error()
	}
	v.SetKeys(keys)
	now := time.Now()
	claims, err := v.Verify(token, ocap.KindClient, now)
	switch {
	case errors.Is(err, ocap.ErrUnknownKid): // the ring in the data dir is the only one it could be from
		return "the coordinator no longer accepts it: its signing key was retired from the key ring, as `capgate admin rotate-keys` twice does"
	case err != nil:
		return "the coordinator no longer accepts it: " + err.Error()
	}
	if left := time.Unix(int64(claims.ExpiresAt), 0).Sub(now); left <= devCredentialRenew {
		return fmt.Sprintf("it expires in %s", left.Round(time.Minute))
	}
	return ""
}

// saveCredentials writes credentials.json (mode 0600, atomically) and
// credentials.env: export lines for a shell (env, see devStack.env).
func saveCredentials(dir string, creds devCredentials, env [][2]string) error {
	b, err := json.MarshalIndent(creds, "", "  ")
	if err != nil {
		return err
	}
	if err := tlsconf.WriteFile(filepath.Join(dir, credentialsFile), append(b, '\n')); err != nil {
		return fmt.Errorf("dev: save credentials: %w", err)
	}
	for _, kv := range env {
		if !cliVariables[kv[0]] { // a programming error: add it to credentialsEnvVariables
			return fmt.Errorf("dev: save credentials: %s is not skipped by the config loader: `capgate coordinator|gateway` would refuse to start after sourcing %s", kv[0], credentialsEnvFile)
		}
	}
	if err := tlsconf.WriteFile(filepath.Join(dir, credentialsEnvFile), []byte(exportLines(env))); err != nil {
		return fmt.Errorf("dev: save credentials: %w", err)
	}
	return nil
}

// The variables capgate dev exports in credentials.env. Each is read by
// the CLI (or curl, or a Kafka client), never a setting: the config
// loader skips every one of credentialsEnvVariables (cliVariables), so
// `capgate coordinator|gateway` still start in a shell that sourced the
// file, and saveCredentials refuses to write any other name.
const (
	envCoordinatorURL = "CAPGATE_COORDINATOR_URL"
	envLeaderURL      = "CAPGATE_LEADER_URL"
	envGatewayURLs    = "CAPGATE_GATEWAY_URLS"
	envAdminToken     = "CAPGATE_ADMIN_TOKEN"
	envCredential     = "CAPGATE_CREDENTIAL"
	envCACert         = "CAPGATE_CACERT"
	envKafkaBootstrap = "CAPGATE_KAFKA_BOOTSTRAP"
)

var credentialsEnvVariables = []string{envCoordinatorURL, envLeaderURL, envGatewayURLs, envAdminToken, envCredential, envCACert, envKafkaBootstrap}

// env is what points the CLI (and curl) at the dev stack: its addresses,
// tokens and, with --tls, the CA bundle (CAPGATE_CACERT; curl --cacert).
// CAPGATE_LEADER_URL is one URL for curl, which takes no list and follows
// no 421: the coordinator, or the replica that led when dev started
// (CAPGATE_COORDINATOR_URL lists every replica, and the first need not
// lead).
func (s *devStack) env() [][2]string {
	env := devEnv(s.creds, s.clientTLS, s.coordinatorList(), s.GatewayURLs()[0])
	env = slices.Insert(env, 1, [2]string{envLeaderURL, s.leaderURL})
	if addr := s.kafkaAddr(); addr != "" {
		env = append(env, [2]string{envKafkaBootstrap, addr})
	}
	return env
}

// kafkaAddr is the gateway's Kafka listener ("" when off).
func (s *devStack) kafkaAddr() string {
	if g := s.Gateways()[0].InProcess(); g != nil {
		return g.KafkaAddr()
	}
	return ""
}

func devEnv(creds devCredentials, clientTLS tlsconf.ClientConfig, coordinatorURL, gatewayURL string) [][2]string {
	env := [][2]string{
		{envCoordinatorURL, coordinatorURL},
		{envGatewayURLs, gatewayURL},
		{envAdminToken, creds.AdminToken},
		{envCredential, creds.ClientCredential},
	}
	if clientTLS.CAFile != "" {
		env = append(env, [2]string{envCACert, clientTLS.CAFile})
	}
	return env
}

// exportLines are env as shell export lines.
func exportLines(env [][2]string) string {
	var b strings.Builder
	for _, kv := range env {
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], kv[1])
	}
	return b.String()
}
