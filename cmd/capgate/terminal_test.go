package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"go.uber.org/zap"
)

// attack is what one admin put in a revoke reason to clear, recolour and
// retitle another admin's terminal, with a C1 CSI, DEL, a bidi override
// and a byte that is not UTF-8 besides.
const attack = "ok\x1b[2J\x1b[31mFAKE\x1b]0;pwned\x07 \u009b31m \x7f \u202eevil \xff\nSEQ forged"

// assertTerminalSafe fails when out holds anything a terminal would obey
// (any unsafe rune but the line breaks of the output's own layout).
func assertTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: not UTF-8: %q", what, out)
	}
	for _, r := range out {
		if r != '\n' && unsafeRune(r) {
			t.Errorf("%s: prints %U raw: %q", what, r, out)
			return
		}
	}
}

// TestAdminAuditTableEscapesAnotherAdminsReason: the red team's attack,
// over HTTP against a real coordinator: a revoke reason full of escape
// sequences, then `admin audit -o table` (and -o json) read by another
// admin. The table printed ESC, BEL, C1 and the bidi override raw.
func TestAdminAuditTableEscapesAnotherAdminsReason(t *testing.T) {
	base, admin := startCoordinator(t)
	flags := []string{"--coordinator", base, "--token", admin}
	out, err := run(t, append([]string{"admin", "grant", "--topic", "orders", "--partition", "0", "--holder", "auditor", "--ops", "fetch", "--ttl", "1m"}, flags...)...)
	var grant struct{ JTI string }
	if err != nil || json.Unmarshal([]byte(out), &grant) != nil {
		t.Fatalf("grant: %v %s", err, out)
	}
	body, _ := json.Marshal(map[string]string{"reason": attack})
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/admin/capabilities/"+grant.JTI+"/revoke", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The coordinator refuses control characters in a reason (400), and
	// the audit log keeps the refused request's reason as sent: what the
	// table must still not show raw.
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("revoke with control characters in its reason: %s, want 400", resp.Status)
	}
	table, err := run(t, append([]string{"admin", "audit", "--limit", "1", "-o", "table"}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	assertTerminalSafe(t, "audit -o table", table)
	if !strings.Contains(table, `\x1b[2J\x1b[31mFAKE\x1b]0;pwned\a`) || strings.Contains(table, "\nSEQ forged") {
		t.Errorf("audit -o table does not show the reason escaped on one row:\n%s", table)
	}
	raw, err := run(t, append([]string{"admin", "audit", "--limit", "1", "-o", "json"}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	assertTerminalSafe(t, "audit -o json", raw)
	var audit struct{ Entries []struct{ Reason string } }
	if err := json.Unmarshal([]byte(raw), &audit); err != nil || len(audit.Entries) != 1 || audit.Entries[0].Reason != strings.ToValidUTF8(attack, "\ufffd") {
		t.Errorf("audit -o json does not carry the reason as sent (err %v):\n%s", err, raw)
	}
}

// TestTablesEscapeEveryCell: every path to a table (printTable,
// printFields, printAny's fields, lists and bare values) escapes.
func TestTablesEscapeEveryCell(t *testing.T) {
	doc, _ := json.Marshal(map[string]any{"group": attack, attack: "key", "members": []any{map[string]any{"id": attack}}})
	for what, print := range map[string]func(*bytes.Buffer) error{
		"printAny object": func(b *bytes.Buffer) error { return printAny(b, doc) },
		"printAny value":  func(b *bytes.Buffer) error { raw, _ := json.Marshal(attack); return printAny(b, raw) },
		"printTable":      func(b *bytes.Buffer) error { return printTable(b, []string{"A", attack}, [][]string{{attack, "x"}}) },
		"printFields":     func(b *bytes.Buffer) error { return printFields(b, [][2]string{{"k", attack}}) },
	} {
		var b bytes.Buffer
		if err := print(&b); err != nil {
			t.Fatal(err)
		}
		assertTerminalSafe(t, what, b.String())
		if !strings.Contains(b.String(), `"ok\x1b[2J`) {
			t.Errorf("%s: the cell is not quoted:\n%s", what, b.String())
		}
	}
}

// TestServerErrorsEscaped: an error body's message (and a body that is
// not JSON) reaches the terminal escaped, on one line; the CLI's own
// multi-line errors keep their line breaks.
func TestServerErrorsEscaped(t *testing.T) {
	jsonBody := `{"error":{"code":"bad_request","message":` + strings.TrimSpace(mustJSON(attack)) + `}}`
	for what, body := range map[string]string{"json": jsonBody, "plain": attack} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(body))
		}))
		c, _ := newAdminClient(srv.URL, "t", srv.Client())
		err := c.do(context.Background(), http.MethodGet, "/v1/admin/groups", nil, nil)
		srv.Close()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		var b bytes.Buffer
		printError(&b, err)
		assertTerminalSafe(t, what, b.String())
		if strings.Count(b.String(), "\n") != 1 || !strings.Contains(b.String(), `\x1b[2J`) {
			t.Errorf("%s: printed %q, want the message escaped on one line", what, b.String())
		}
	}
	var b bytes.Buffer
	printError(&b, errors.New("address in use\n(is another capgate dev running?)"))
	if b.String() != "capgate: address in use\n(is another capgate dev running?)\n" {
		t.Errorf("our own line break was escaped: %q", b.String())
	}
}

// TestJSONOutputTerminalSafe: --output json and token inspect escape DEL,
// C1 and format characters (encoding/json escapes only C0) and stay the
// same JSON.
func TestJSONOutputTerminalSafe(t *testing.T) {
	v := map[string]any{"s": "a\u009b\u202e\x7f\U000E0001b\u00e9", "n": 1.5}
	var b bytes.Buffer
	if err := printJSON(&b, v); err != nil {
		t.Fatal(err)
	}
	assertTerminalSafe(t, "printJSON", b.String())
	var back map[string]any
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back["s"] != v["s"] || !strings.Contains(b.String(), "é") {
		t.Fatalf("printJSON wrote %s (err %v): not the same JSON", b.String(), err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestConsoleLogsEscaped: consume's and dev's console logs print the
// message as it is and fields as JSON (C0 escaped, DEL, C1 and bidi
// overrides not): a server's error message in a field, or text in a
// message, reached the terminal raw.
func TestConsoleLogsEscaped(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = f // newLogger's sink is stderr
	log, err := newLogger(logConfig{Level: "info", Format: "console"})
	os.Stderr = stderr
	if err != nil {
		t.Fatal(err)
	}
	log.With(zap.String("with", attack)).Info("msg "+attack, zap.String("s", attack), zap.Error(errors.New(attack)), zap.Stringer("st", stringer(attack)))
	log.Sync()
	out, _ := os.ReadFile(f.Name())
	if strings.Count(string(out), "\n") != 1 {
		t.Fatalf("one log line printed %d lines:\n%s", strings.Count(string(out), "\n"), out)
	}
	assertTerminalSafe(t, "console log", strings.ReplaceAll(string(out), "\t", " "))
	for _, key := range []string{`"with"`, `"s"`, `"error"`, `"st"`, "msg ok"} {
		if !strings.Contains(string(out), key) {
			t.Errorf("the log line lacks %s:\n%s", key, out)
		}
	}
}

type stringer string

func (s stringer) String() string { return string(s) }
