package harness

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/capgate/capgate/api"
)

// ErrKilled is what every request of a killed in-process consumer fails
// with.
var ErrKilled = errors.New("harness: consumer killed")

// Recorder is a consumer's http.RoundTripper: it reports every
// coordinator call (grants, renewals, revokes, commits) and every fetch as
// Lines, can hold back calls of one kind, and can be killed (every request
// in flight is cut, every later one fails). Safe for concurrent use.
type Recorder struct {
	base    http.RoundTripper
	emit    func(Line)
	group   string
	secrets bool

	killed context.Context
	kill   context.CancelFunc

	mu    sync.Mutex
	holds map[string]chan struct{} // ops held until closed
}

// NewRecorder wraps a fresh keep-alive transport; emit receives every
// line (from many goroutines). With secrets, grants and joins carry the
// capability and member token.
func NewRecorder(group string, secrets bool, emit func(Line)) *Recorder {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConns, base.MaxIdleConnsPerHost = 1024, 256
	killed, kill := context.WithCancel(context.Background())
	return &Recorder{base: base, emit: emit, group: group, secrets: secrets, killed: killed, kill: kill, holds: map[string]chan struct{}{}}
}

// Kill cuts every request in flight and fails every later one.
func (r *Recorder) Kill() { r.kill() }

// Killed reports whether Kill was called.
func (r *Recorder) Killed() bool { return r.killed.Err() != nil }

// Hold keeps coordinator calls of op ("join", "heartbeat", "commit",
// "leave") from being sent until release is called.
func (r *Recorder) Hold(op string) (release func()) {
	gate := make(chan struct{})
	r.mu.Lock()
	r.holds[op] = gate
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			if r.holds[op] == gate {
				delete(r.holds, op)
			}
			r.mu.Unlock()
			close(gate)
		})
	}
}

// CloseIdleConnections closes kept-alive connections (before servers
// shut down, so they need not wait for them).
func (r *Recorder) CloseIdleConnections() {
	if t, ok := r.base.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
}

// RoundTrip implements http.RoundTripper.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.killed.Err() != nil {
		return nil, ErrKilled
	}
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(r.killed, cancel)
	release := func() { stop(); cancel() }
	req = req.WithContext(ctx)
	var resp *http.Response
	var err error
	if op, ok := coordinatorOp(req); ok {
		resp, err = r.coordinatorCall(req, op)
	} else if ref, ok := fetchOf(req); ok {
		resp, err = r.fetch(req, ref)
	} else {
		resp, err = r.base.RoundTrip(req)
	}
	if err != nil {
		release()
		if r.killed.Err() != nil {
			err = ErrKilled
		}
		return nil, err
	}
	resp.Body = &releaseBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

type releaseBody struct {
	io.ReadCloser
	release func()
}

func (b *releaseBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

// coordinatorOp recognises POST /v1/groups/{g}/{op}.
func coordinatorOp(req *http.Request) (string, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if req.Method != http.MethodPost || len(parts) != 4 || parts[1] != "groups" {
		return "", false
	}
	return parts[3], true
}

func (r *Recorder) waitHold(ctx context.Context, op string) error {
	for {
		r.mu.Lock()
		gate := r.holds[op]
		r.mu.Unlock()
		if gate == nil {
			return nil
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (r *Recorder) coordinatorCall(req *http.Request, op string) (*http.Response, error) {
	if err := r.waitHold(req.Context(), op); err != nil {
		return nil, err
	}
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	member := ClaimsOf(bearer(req)).Subject
	sent := Now()
	if op == "commit" {
		// Reported before it leaves: a consumer killed before the answer
		// still shows a commit the coordinator may have accepted.
		r.commits(sent, 0, member, body, 0, "", true)
	}
	resp, answer, status, code, err := readAnswer(r.base.RoundTrip(req))
	done := Now()
	if op == "join" && status == http.StatusOK {
		member = r.joined(done, answer, member)
	}
	r.emit(Line{T: done, Sent: sent, Kind: LineCall, Op: op, Member: member, Group: r.group, Status: status, Code: code, Error: errText(err)})
	switch {
	case op == "heartbeat" && status == http.StatusOK:
		r.heartbeatNews(done, member, answer)
	case op == "commit":
		r.commits(sent, done, member, body, status, code, false)
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// readBody reads a request's body and puts it back.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	return b, nil
}

// readAnswer reads a whole coordinator answer and puts it back.
func readAnswer(resp *http.Response, err error) (*http.Response, []byte, int, string, error) {
	if err != nil {
		return nil, nil, 0, "", err
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	return resp, answer, resp.StatusCode, errorCode(resp.StatusCode, answer), err
}

// joined reports a join answer and its grants; it returns the member id.
func (r *Recorder) joined(at Time, answer []byte, member string) string {
	var j api.JoinResponse
	if json.Unmarshal(answer, &j) != nil {
		return member
	}
	ln := Line{T: at, Kind: LineJoined, Member: j.MemberID, Group: r.group}
	if r.secrets {
		ln.Token = j.MemberToken
	}
	r.emit(ln)
	r.emitGrants(at, j.MemberID, LineGrant, j.Grants)
	return j.MemberID
}

func (r *Recorder) heartbeatNews(at Time, member string, answer []byte) {
	var news api.HeartbeatResponse
	if json.Unmarshal(answer, &news) != nil {
		return
	}
	for _, ref := range news.Revoke {
		r.emit(Line{T: at, Kind: LineRevoke, Member: member, Group: r.group, Topic: ref.Topic, Partition: ref.Partition, Epoch: ref.Epoch})
	}
	r.emitGrants(at, member, LineGrant, news.Grants)
	r.emitGrants(at, member, LineRenew, news.Renew)
}

func (r *Recorder) emitGrants(at Time, member, kind string, grants []api.Grant) {
	for _, g := range grants {
		ln := Line{T: at, Kind: kind, Member: member, Group: r.group, Topic: g.Topic, Partition: g.Partition,
			Epoch: g.Epoch, Offset: g.Offset}
		if exp, err := time.Parse(time.RFC3339Nano, g.ExpiresAt); err == nil {
			ln.Expires = FromWall(exp)
		}
		if r.secrets {
			ln.Capability = g.Capability
		}
		r.emit(ln)
	}
}

// commits reports each offset of a commit request: pending when it is
// sent, then with its answer.
func (r *Recorder) commits(sent, done Time, member string, body []byte, status int, code string, pending bool) {
	var c api.CommitRequest
	if json.Unmarshal(body, &c) != nil {
		return
	}
	for _, o := range c.Offsets {
		r.emit(Line{T: max(done, sent), Sent: sent, Kind: LineCommit, Member: member, Group: r.group, Topic: o.Topic, Partition: o.Partition,
			Epoch: ClaimsOf(o.Capability).Epoch, Offset: o.Offset, Release: c.Release, Status: status, Code: code, Pending: pending})
	}
}

// fetchRef is what a fetch request names.
type fetchRef struct {
	topic     string
	partition int32
	offset    int64
}

// fetchOf recognises GET /v1/topics/{t}/partitions/{p}/records.
func fetchOf(req *http.Request) (fetchRef, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if req.Method != http.MethodGet || len(parts) != 6 || parts[1] != "topics" || parts[5] != "records" {
		return fetchRef{}, false
	}
	p, _ := strconv.ParseInt(parts[4], 10, 32)
	offset, _ := strconv.ParseInt(req.URL.Query().Get("offset"), 10, 64)
	return fetchRef{topic: parts[2], partition: int32(p), offset: offset}, true
}

func (r *Recorder) fetch(req *http.Request, ref fetchRef) (*http.Response, error) {
	claims := ClaimsOf(bearer(req))
	sent := Now()
	resp, err := r.base.RoundTrip(req)
	ln := Line{Sent: sent, Kind: LineFetch, Member: claims.Subject, Group: r.group, Topic: ref.topic, Partition: ref.partition,
		Epoch: claims.Epoch, Offset: ref.offset, Gateway: req.URL.Scheme + "://" + req.URL.Host, Error: errText(err)}
	if err == nil {
		ln.Status = resp.StatusCode
		if resp.StatusCode/100 != 2 {
			head, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
			ln.Code = errorCode(resp.StatusCode, head)
		}
	}
	ln.T = Now()
	r.emit(ln)
	return resp, err
}

// errorCode is the api code of an error body, "" for a 2xx.
func errorCode(status int, body []byte) string {
	if status/100 == 2 {
		return ""
	}
	var e api.ErrorBody
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return string(e.Error.Code)
	}
	return "status_" + strconv.Itoa(status)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func bearer(req *http.Request) string {
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
}

// TokenClaims are the claims of a capgate token the harness looks at.
type TokenClaims struct {
	Subject string `json:"sub"`
	JTI     string `json:"jti"`
	Epoch   uint64 `json:"ep"`
	Exp     int64  `json:"exp"`
	Iat     int64  `json:"iat"`
}

// ClaimsOf decodes a token's payload without verifying it.
func ClaimsOf(token string) TokenClaims {
	var c TokenClaims
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return c
	}
	if b, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
		_ = json.Unmarshal(b, &c)
	}
	return c
}
