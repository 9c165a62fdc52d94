package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/client"
)

func TestTextRecord(t *testing.T) {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	writeTextRecord(w, &client.Record{Topic: "demo", Partition: 3, Offset: 17, Key: []byte("k"), Value: []byte("hello world")})
	writeTextRecord(w, &client.Record{Topic: "demo", Partition: 3, Offset: 18, Value: []byte("two\nlines\t\xff")})
	w.Flush()
	want := "demo/3\t17\tk\thello world\n" + "demo/3\t18\t\t\"two\\nlines\\t\\xff\"\n"
	if b.String() != want {
		t.Fatalf("got %q\nwant %q", b.String(), want)
	}
}

func TestJSONRecord(t *testing.T) {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	writeJSONRecord(w, &client.Record{Topic: "t", Partition: 1, Offset: 2, Timestamp: ts, Value: []byte("v")})
	writeJSONRecord(w, &client.Record{Topic: "t", Partition: 1, Offset: 3, Timestamp: ts, Key: []byte{0xff}, Value: []byte{}})
	w.Flush()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		`{"topic":"t","partition":1,"offset":2,"timestamp":"2026-01-02T03:04:05Z","key":null,"value":"v"}`,
		`{"topic":"t","partition":1,"offset":3,"timestamp":"2026-01-02T03:04:05Z","key":null,"key_base64":"/w==","value":""}`,
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d\n got %s\nwant %s", i, lines[i], want[i])
		}
		if !json.Valid([]byte(lines[i])) {
			t.Errorf("line %d is not JSON", i)
		}
	}
}

func TestProgressOffTheTerminal(t *testing.T) {
	var stderr bytes.Buffer
	p := newProgress(&stderr, false)
	stop := p.run(context.Background(), nil)
	if err := p.records(3, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	stop()
	if stderr.Len() != 0 || p.total != 3 {
		t.Fatalf("wrote %q, counted %d", stderr.String(), p.total)
	}
}

func TestProgressOnATerminal(t *testing.T) {
	var stderr bytes.Buffer
	p := newProgress(&stderr, true)
	p.records(2, func() error { return nil })
	p.records(1, func() error { return nil })
	out := stderr.String()
	if !strings.HasSuffix(out, "\r\x1b[K3 records, 0 rec/s, lag ?") || strings.Count(out, "\r\x1b[K") != 3 {
		t.Fatalf("status line writes %q", out)
	}
}

func TestConsumeFlags(t *testing.T) {
	t.Setenv("CAPGATE_CREDENTIAL", "")
	if _, err := run(t, "consume", "--topic", "demo"); err == nil || !strings.Contains(err.Error(), "group") {
		t.Errorf("without --group: %v", err)
	}
	if _, err := run(t, "consume", "--group", "g", "--topic", "demo"); err == nil || !strings.Contains(err.Error(), "--credential-file") {
		t.Errorf("without a credential: %v", err)
	}
	if _, err := run(t, "consume", "--group", "g", "--credential", "x"); err == nil || !strings.Contains(err.Error(), "--topic") {
		t.Errorf("without a subscription: %v", err)
	}
	if _, err := run(t, "consume", "--group", "g", "--topic", "t", "--credential", "x", "--format", "xml"); err == nil || !strings.Contains(err.Error(), "--format") {
		t.Errorf("--format xml: %v", err)
	}
	// Negative limits were taken for "no limit": --idle-exit -1s waited for ever.
	for _, flag := range []string{"--max-records=-1", "--idle-exit=-1s"} {
		if _, err := run(t, "consume", "--group", "g", "--topic", "t", "--credential", "x", flag); err == nil || !strings.Contains(err.Error(), "must be >= 0") {
			t.Errorf("%s: %v", flag, err)
		}
	}
	if _, err := run(t, "admin", "audit", "--limit=-1", "--token", "x", "--coordinator", "http://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "--limit") {
		t.Errorf("admin audit --limit=-1: %v", err)
	}
}

// TestProduceKeyIsNotARecordKey: `produce --key k` (a record key, as a
// new user reads it) got "tls.cert_file and key_file: set both or
// neither"; it now says what --key is and where record keys come from.
func TestProduceKeyIsNotARecordKey(t *testing.T) {
	t.Setenv("CAPGATE_CERT", "")
	_, err := run(t, "produce", "--topic", "demo", "--partition", "0", "--key", "mykey", "--capability", "x")
	if err == nil || !strings.Contains(err.Error(), "--key-separator") {
		t.Fatalf("produce --key mykey: %v", err)
	}
}

func TestProduceNeedsACapability(t *testing.T) {
	t.Setenv("CAPGATE_CAPABILITY", "")
	t.Setenv("CAPGATE_ADMIN_TOKEN", "")
	_, err := run(t, "produce", "--topic", "demo")
	if err == nil || !strings.Contains(err.Error(), "--capability") || !strings.Contains(err.Error(), "--token-file") {
		t.Fatalf("without a capability or admin token: %v", err)
	}
}

func TestNextBatch(t *testing.T) {
	f := &produceFlags{keySeparator: ":", batchRecords: 2, batchBytes: 1 << 20}
	lines := readLines(context.Background(), strings.NewReader("k1:v1\nplain\r\n\nlast"))
	var got []string
	var err error
	for err == nil {
		var batch []client.Record
		batch, err = nextBatch(context.Background(), lines, f)
		if len(batch) > 2 {
			t.Fatalf("batch of %d records, bound 2", len(batch))
		}
		for _, r := range batch {
			got = append(got, string(r.Key)+"="+string(r.Value))
		}
	}
	if !errors.Is(err, io.EOF) {
		t.Fatalf("ended with %v, want EOF", err)
	}
	want := []string{"k1=v1", "=plain", "=", "=last"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("records %q, want %q", got, want)
	}
}

// TestConsumeOffsetFlag: --offset (-o) start|end (or Kafka's earliest|
// latest, or kcat's beginning) becomes the consumer's own
// client.Config.OffsetReset; without
// it the group's offset_reset decides. An offset number, rpk style, is a
// usage error (exit status 2) naming what is supported and the admin
// reset that moves a group's offsets; so is any other word.
func TestConsumeOffsetFlag(t *testing.T) {
	t.Setenv("CAPGATE_COORDINATOR_URL", "")
	t.Setenv("CAPGATE_GATEWAY_URLS", "")
	for flag, want := range map[string]string{"": "", "start": client.OffsetResetEarliest, "earliest": client.OffsetResetEarliest,
		"beginning": client.OffsetResetEarliest, "end": client.OffsetResetLatest, "latest": client.OffsetResetLatest} {
		f := &consumeFlags{group: "g", topics: []string{"t"}, credential: "x", format: "text", offset: flag,
			endpoints: endpointFlags{coordinator: "http://127.0.0.1:7070", gateways: []string{"http://127.0.0.1:8080"}}}
		cfg, err := f.clientConfig()
		if err != nil || cfg.OffsetReset != want {
			t.Errorf("--offset %q: offset_reset %q, %v; want %q", flag, cfg.OffsetReset, err, want)
		}
	}
	for _, bad := range []struct{ value, says string }{
		{"42", "capgate admin offsets reset g TOPIC"},
		{"-3", "not an offset number"},
		{"+2", "start or end"},
		{"stored", "want start or end"},
		{"START", "want start or end"},
	} {
		_, err := run(t, "consume", "--group", "g", "--topic", "t", "--credential", "x", "-o", bad.value)
		if err == nil || !strings.Contains(err.Error(), bad.says) || exitCode(err) != exitUsage {
			t.Errorf("-o %s: %v (exit %d), want a usage error (exit 2) saying %q", bad.value, err, exitCode(err), bad.says)
		}
	}
}

// TestUsageErrorsExitTwo: mistakes in the command line exit 2 — an
// unknown flag, a flag value that does not parse, a stray argument, an
// unknown subcommand — and failures of the work 1.
func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"consume", "--no-such-flag"},
		{"consume", "--max-records", "many"},
		{"consume", "--group", "g", "--topic", "t", "--credential", "x", "--format", "xml"},
		{"version", "extra"},
		{"consume", "extra"},
		{"keys", "jwks", "other.json"},
		{"admin", "no-such-command"},
		{"no-such-command"},
		{"consume", "--topic", "t", "--credential", "x"},
		{"consume", "--group", "a/b", "--topic", "t", "--credential", "x"},
		{"admin", "lease", "g", "t", "0", "--token", "x"},
		{"admin", "revoke", "g", "t", "x", "--token", "x"},
	} {
		if _, err := run(t, args...); err == nil || exitCode(err) != exitUsage {
			t.Errorf("capgate %s: %v, exit %d; want exit 2", strings.Join(args, " "), err, exitCode(err))
		}
	}
	_, err := run(t, "admin", "groups", "--token", "x", "--coordinator", "http://127.0.0.1:1")
	if err == nil || exitCode(err) != exitFailure {
		t.Errorf("an unreachable coordinator: %v, exit %d; want exit 1", err, exitCode(err))
	}
}

// TestConsumeRefusalsInFlagWords: a setting the SDK refuses is reported
// in the flag's words as a usage error (exit 2) — the SDK's own message
// names the Go field (Config.Gateways), which a CLI user never wrote —
// and a comma-separated --coordinator (capgate dev --replicas) is taken.
func TestConsumeRefusalsInFlagWords(t *testing.T) {
	t.Setenv("CAPGATE_COORDINATOR_URL", "")
	t.Setenv("CAPGATE_GATEWAY_URLS", "")
	base := func() *consumeFlags {
		return &consumeFlags{group: "g", topics: []string{"t"}, credential: "x", format: "text",
			endpoints: endpointFlags{coordinator: "http://127.0.0.1:7070,http://127.0.0.1:7071", gateways: []string{"http://127.0.0.1:8080"}}}
	}
	if _, err := base().clientConfig(); err != nil {
		t.Fatalf("a replica list: %v", err)
	}
	gateway := base()
	gateway.endpoints.gateways = []string{"127.0.0.1:8080"}
	cert := base()
	cert.endpoints.tls.cert = "client.crt"
	for flag, f := range map[string]*consumeFlags{"--gateways": gateway, "--cert / --key": cert} {
		_, err := f.clientConfig()
		if err == nil || !strings.HasPrefix(err.Error(), flag+": ") || strings.Contains(err.Error(), "Config.") || exitCode(err) != exitUsage {
			t.Errorf("%s: %v (exit %d), want a usage error in the flag's words", flag, err, exitCode(err))
		}
	}
}
