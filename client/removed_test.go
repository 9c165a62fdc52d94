package client

import (
	"encoding/base64"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
)

// TestRemovedWarningNamesARunnableCommand: the warning after an
// administrator's revoke-member names the command that stops the
// consumer with its credential's jti; a jti beginning with '-' (minted
// before ocap.Minter.NewJTI stopped making them) goes after "--", or the
// printed command failed as an unknown flag.
func TestRemovedWarningNamesARunnableCommand(t *testing.T) {
	for jti, want := range map[string]string{
		"ckpMYd7psOAlDaquRrLSw_": "capgate admin revoke-capability ckpMYd7psOAlDaquRrLSw_",
		"-ckpMYd7psOAlDaquRrLSw": "capgate admin revoke-capability -- -ckpMYd7psOAlDaquRrLSw",
	} {
		core, logs := observer.New(zap.WarnLevel)
		payload := base64.RawURLEncoding.EncodeToString([]byte(`{"jti":"` + jti + `"}`))
		c := &Consumer{log: zap.New(core), cfg: Config{Credential: "e30." + payload + ".c2ln"}}
		c.logRemoved(driver.MemberRemoved{Member: "m1"})
		entries := logs.All()
		if len(entries) != 1 || !strings.HasSuffix(entries[0].Message, want) {
			t.Errorf("jti %s: logged %+v, want a warning ending %q", jti, entries, want)
		}
	}
}

// TestUnrestoredMemberIsNotReportedRevoked: a member a restart restored
// without its topic_pattern's topics is removed at its heartbeat
// (api.RemovedPatternUnrestored); the warning says so, not that an
// administrator revoked it (and to revoke its credential to stop it).
func TestUnrestoredMemberIsNotReportedRevoked(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	c := &Consumer{log: zap.New(core)}
	c.logRemoved(driver.MemberRemoved{Member: "m1", Removed: api.RemovedPatternUnrestored})
	entries := logs.All()
	if len(entries) != 1 || !strings.Contains(entries[0].Message, "without its topic_pattern's topics") || strings.Contains(entries[0].Message, "revoke") {
		t.Errorf("logged %+v, want one warning saying the restore left it without its pattern's topics", entries)
	}
}
