package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestDevRemintSaysWhyAndToSourceAgain: after `capgate admin
// rotate-keys` twice the key that signed the dev client credential is
// retired; the next `capgate dev` mints a new one and its WARN says why
// (the coordinator no longer accepts it) and that shells which sourced
// credentials.env must source it again. It warned only "minted a client
// credential for any group and topic", and a shell's CAPGATE_CREDENTIAL
// stayed dead without a word.
func TestDevRemintSaysWhyAndToSourceAgain(t *testing.T) {
	dir := t.TempDir()
	f := devFlags{dataDir: dir, brokerAddr: "127.0.0.1:0", coordinatorAddr: "127.0.0.1:0", gatewayAddr: "127.0.0.1:0"}
	dev, err := startDev(context.Background(), f, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	old := dev.creds.ClientCredential
	for range 2 {
		if err := dev.MustAdmin(context.Background(), http.MethodPost, "/v1/admin/keys/rotate", nil, nil); err != nil {
			dev.Close()
			t.Fatal(err)
		}
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}

	core, logs := observer.New(zapcore.InfoLevel)
	dev, err = startDev(context.Background(), f, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if dev.creds.ClientCredential == old {
		t.Fatal("the retired credential was kept")
	}
	warned := logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("client credential").All()
	if len(warned) != 1 {
		t.Fatalf("warnings %+v, want one about the client credential", logs.All())
	}
	envFile := filepath.Join(dir, credentialsEnvFile)
	for _, want := range []string{"no longer accepts it", "retired", envCredential, "source it again: . " + envFile} {
		if !strings.Contains(warned[0].Message, want) {
			t.Errorf("the warning %q does not say %q", warned[0].Message, want)
		}
	}
	if env, err := os.ReadFile(envFile); err != nil || !strings.Contains(string(env), envCredential+"="+dev.creds.ClientCredential+"\n") {
		t.Fatalf("credentials.env does not hold the new credential (%v)", err)
	}
}
