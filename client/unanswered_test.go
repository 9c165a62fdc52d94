package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/api"
)

// TestUnanswered: a fetch no gateway answered is remembered until any
// gateway answers one (a refusal counts as an answer; a cancelled fetch
// counts as nothing), and each gateway's failures are logged at most once
// per unansweredLogEvery, the next line counting those left out.
func TestUnanswered(t *testing.T) {
	var u unanswered
	now := time.Unix(1000, 0)
	refused := errors.New("dial tcp: connection refused")
	if log, _ := u.note(0, refused, now); !log || u.last != refused {
		t.Fatalf("first failure: log %v, last %v", log, u.last)
	}
	for i := range 3 {
		if log, _ := u.note(0, refused, now.Add(time.Duration(i)*time.Second)); log {
			t.Fatalf("failure %d within %s logged again", i, unansweredLogEvery)
		}
	}
	if log, _ := u.note(1, refused, now); !log {
		t.Fatal("another gateway's first failure not logged")
	}
	if log, missed := u.note(0, refused, now.Add(unansweredLogEvery)); !log || missed != 3 {
		t.Fatalf("after %s: log %v, missed %d, want true 3", unansweredLogEvery, log, missed)
	}
	u.note(0, fmt.Errorf("wrapped: %w", context.Canceled), now)
	if u.last != refused {
		t.Fatalf("a cancelled fetch changed the last failure: %v", u.last)
	}
	u.note(0, &Error{Op: "fetch demo/0", Code: api.CodeOutOfSync, Status: 503}, now)
	if u.last != nil {
		t.Fatalf("a refusal is an answer, last still %v", u.last)
	}
	u.note(1, refused, now)
	u.note(1, nil, now)
	if u.last != nil {
		t.Fatalf("an answered fetch, last still %v", u.last)
	}
}

// TestFetchHintOncePerGateway: WithFetchHint's hint goes with the first
// logged failure of each gateway's outage — the failures go on being
// logged every unansweredLogEvery, the hint is not repeated with them —
// and again with the first failure after that gateway answered (a new
// outage, hours later perhaps: the first hint has scrolled away); another
// gateway's answer does not count.
func TestFetchHintOncePerGateway(t *testing.T) {
	var u unanswered
	if !u.hintDue(0) || u.hintDue(0) || !u.hintDue(1) || u.hintDue(1) || u.hintDue(0) {
		t.Fatalf("hints given: %v, want gateways 0 and 1 once each", u.hinted)
	}
	now := time.Unix(1000, 0)
	u.note(1, nil, now)
	if u.hintDue(0) {
		t.Fatal("gateway 1 answered, and gateway 0's outage was hinted again")
	}
	if !u.hintDue(1) || u.hintDue(1) {
		t.Fatal("gateway 1 answered and failed again: want its new outage hinted once")
	}
	u.note(0, &Error{Op: "fetch demo/0", Code: api.CodeOutOfSync, Status: 503}, now)
	if !u.hintDue(0) {
		t.Fatal("gateway 0 answered (a refusal) and failed again: want its new outage hinted")
	}
}

// TestDefaultFetchHintSaysWhatTheErrorMeans: a consumer without
// WithFetchHint whose Gateways URL is a port that closes an HTTP request
// unanswered (a Kafka port: a broker, a gateway's Kafka listener) warns
// with a hint naming that and Config.Gateways; before, a Go program read
// the bare "EOF" / "connection reset by peer" every 10 s (the CLI had its
// own hint). Each cause the hint names, checked on its own too.
func TestDefaultFetchHintSaysWhatTheErrorMeans(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() { // a Kafka port, as far as HTTP goes: closes what it is sent
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 512)
			_, _ = conn.Read(buf)
			conn.Close()
		}
	}()
	var e *env
	e = newEnv(t, func(int) []api.Grant { return []api.Grant{e.grantOf(p0, 1, 0, "cap-p0")} })
	core, logs := observer.New(zapcore.WarnLevel)
	cfg := e.config()
	cfg.Gateways = []string{"http://" + ln.Addr().String()}
	e.start(cfg, WithLogger(zap.New(core)))
	failed := func() []observer.LoggedEntry {
		return logs.FilterMessage("fetch failed: the gateway did not answer; retrying").AllUntimed()
	}
	waitFor(t, "the fetch failure warned", func() bool { return len(failed()) > 0 })
	hint, _ := failed()[0].ContextMap()["hint"].(string)
	if !strings.Contains(hint, "Kafka port") || !strings.Contains(hint, "Config.Gateways") {
		t.Fatalf("hint %q, want a Kafka port and Config.Gateways named", hint)
	}

	for _, c := range []struct {
		url  string
		err  error
		want string
	}{
		{"http://gw:8080", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, "nothing listens at gw:8080"},
		{"http://gw:8080", &net.DNSError{Name: "gw", IsNotFound: true}, `host "gw" not found`},
		{"http://gw:8080", fmt.Errorf("read: %w", syscall.ECONNRESET), "(then https://)"},
		{"https://gw:8443", io.EOF, "closed the connection without an HTTP answer: is it a gateway's HTTP address?"},
		{"http://gw:8080", context.DeadlineExceeded, "no answer from gw:8080"},
		{"http://gw:8080", errors.New("something else"), ""},
	} {
		got := defaultFetchHint(context.Background(), c.url, c.err)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%v: hint %q, want %q in it", c.err, got, c.want)
		}
	}
}
