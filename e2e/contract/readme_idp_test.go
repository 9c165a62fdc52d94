package contract

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/config"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
	"github.com/capgate/capgate/gateway"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/identity/idptest"
	"github.com/capgate/capgate/internal/stack"
)

// readmeSection returns the fenced blocks of README.md's section title,
// in order, with their language tags.
func readmeSection(t *testing.T, title string) (tags, blocks []string) {
	t.Helper()
	root, err := stack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n"+title+"\n")
	if start < 0 {
		t.Fatalf("README.md has no %q section", title)
	}
	text = text[start+len(title)+2:]
	if end := strings.Index(text, "\n## "); end >= 0 {
		text = text[:end]
	}
	var cur []string
	tag, open := "", false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case !open && strings.HasPrefix(line, "```"):
			tag, cur, open = strings.TrimPrefix(line, "```"), nil, true
		case open && line == "```":
			tags, blocks = append(tags, tag), append(blocks, strings.Join(cur, "\n")+"\n")
			open = false
		case open:
			cur = append(cur, line)
		}
	}
	return tags, blocks
}

// readmeFile is the part of capgate's configuration file the README's
// YAML blocks show.
type readmeFile struct {
	Coordinator coordinator.Config `yaml:"coordinator"`
	Gateway     gateway.Config     `yaml:"gateway"`
}

func decodeReadmeYAML(t *testing.T, section, block string) readmeFile {
	t.Helper()
	f := readmeFile{Coordinator: coordinator.DefaultConfig(), Gateway: gateway.DefaultConfig()}
	if err := config.Decode([]byte(block), &f); err != nil {
		t.Fatalf("README %s: YAML block is not capgate configuration: %v\n%s", section, err, block)
	}
	return f
}

// TestReadmeTLSAndIdPConfiguration: every YAML block of the README's "TLS
// quickstart" and "Use your IdP" sections is capgate configuration (known
// fields only, the documented values valid), and the IdP section's join
// works as written: its oidc block, pointed at an in-test issuer, is the
// coordinator's; its curl command, run by bash with an IdP token whose
// groups claim is kafka-billing, joins billing-eu; a token no rule maps
// is refused with 403 forbidden, as the section says.
func TestReadmeTLSAndIdPConfiguration(t *testing.T) {
	tags, blocks := readmeSection(t, "## TLS quickstart")
	yamls := 0
	for i, b := range blocks {
		if tags[i] == "yaml" {
			f := decodeReadmeYAML(t, "TLS quickstart", b)
			if err := f.Coordinator.TLS.Validate(); err != nil {
				t.Errorf("README TLS quickstart: coordinator.tls: %v", err)
			}
			yamls++
		}
	}
	if yamls != 1 {
		t.Fatalf("README TLS quickstart: %d YAML blocks, want 1", yamls)
	}

	tags, blocks = readmeSection(t, "## Use your IdP")
	var oidc identity.Config
	var join string
	for i, b := range blocks {
		switch {
		case tags[i] == "yaml":
			oidc = decodeReadmeYAML(t, "Use your IdP", b).Coordinator.OIDC
		case tags[i] == "console" && join == "" && strings.Contains(b, "/join"):
			join = strings.TrimPrefix(strings.TrimSpace(b), "$ ")
		}
	}
	if len(oidc.Issuers) != 1 || join == "" {
		t.Fatalf("README Use your IdP: want one oidc issuer and a join command, got %d issuers, join %q", len(oidc.Issuers), join)
	}
	if err := oidc.Validate("oidc"); err != nil {
		t.Fatalf("README Use your IdP: the oidc block as written: %v", err)
	}
	idp := idptest.New(t, "RS256")
	oidc.Issuers[0].Issuer, oidc.Issuers[0].CAFile = idp.URL, idp.CAFile
	cluster := sdk.StartCluster(t, sdk.ClusterOptions{Topic: "invoices", Partitions: 2,
		CoordinatorConfig: func(cfg *coordinator.Config) { cfg.OIDC = oidc }})

	run := func(groups []string) string {
		t.Helper()
		now := time.Now()
		token := idp.Token(idptest.Claims{"sub": "svc-billing", "aud": "capgate", "groups": groups, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
		cmd := exec.Command("bash", "-c", "set -e\n"+join)
		cmd.Env = append(os.Environ(), "CAPGATE_COORDINATOR_URL="+cluster.CoordinatorURL, "IDP_TOKEN="+token)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("README join: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := run([]string{"kafka-billing"}); !strings.Contains(out, `"member_token"`) || !strings.Contains(out, `"topic":"invoices"`) {
		t.Fatalf("README join with a kafka-billing token: %s", out)
	}
	if out := run([]string{"staff"}); !strings.Contains(out, `"code":"forbidden"`) {
		t.Fatalf("README join with a token no rule maps: %s, want forbidden", out)
	}
}
