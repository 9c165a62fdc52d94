// Package crlftest sends raw bytes to an HTTP server and reads every
// answer until the server closes the connection: what the tests of the
// servers behind internal/crlf need to show a malformed request answered
// once, at once, and nothing it smuggled served.
package crlftest

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// Answer is one response read off the connection.
type Answer struct {
	Status      int
	Code        api.Code // the JSON error body's code, if any
	ContentType string
	Body        string
}

// AnswersUntilClose writes raw on a fresh connection to addr and reads
// answers until the server closes it; closed is false when wait passed
// first (or the dial failed: err).
func AnswersUntilClose(addr, raw string, wait time.Duration) (answers []Answer, closed bool, err error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, false, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(wait))
	go func() { _, _ = io.WriteString(conn, raw) }()
	br := bufio.NewReader(conn)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			var ne net.Error
			return answers, !(errors.As(err, &ne) && ne.Timeout()), nil
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e api.ErrorBody
		_ = json.Unmarshal(b, &e)
		answers = append(answers, Answer{resp.StatusCode, e.Error.Code, resp.Header.Get("Content-Type"), string(b)})
	}
}

// Case is a request and the one answer it must get before the server
// closes the connection.
type Case struct {
	Name, Raw string
	Status    int
	Code      api.Code
}

// ExpectOneAnswerEach sends each case on a connection of its own, all at
// once (a refused connection lingers up to a second before it closes,
// internal/linger), and reports through t every case that did not get
// exactly its answer, with a JSON body, and then the connection closed,
// within wait.
func ExpectOneAnswerEach(t testing.TB, addr string, cases []Case, wait time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Go(func() {
			start := time.Now()
			answers, closed, err := AnswersUntilClose(addr, c.Raw, wait)
			if len(answers) != 1 || answers[0].Status != c.Status || answers[0].Code != c.Code || answers[0].ContentType != api.MediaJSON || !closed || err != nil {
				t.Errorf("%s: answers %+v, connection closed %v (%v) after %v; want one %d %s JSON answer, then the connection closed",
					c.Name, answers, closed, err, time.Since(start).Round(time.Millisecond), c.Status, c.Code)
			}
		})
	}
	wg.Wait()
}
