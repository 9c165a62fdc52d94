package client

// Test doubles of the coordinator and the gateways, speaking the HTTP
// contract of DESIGN §5 from memory. Only what the consumer uses.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
)

const testCredential = "client-credential-secret"

// fakeCoordinator answers join, heartbeat, commit and leave. Heartbeats
// are held until a test scripts news (or a failure) or wait_ms passes.
type fakeCoordinator struct {
	srv *httptest.Server

	mu     sync.Mutex
	joins  []api.JoinRequest
	token  string // the current member's token
	grants func(join int) []api.Grant

	arrivals     int // heartbeats received
	newsServedAt int // the arrival that carried the last scripted news

	news     chan api.HeartbeatResponse
	failures chan api.Code
	joined   chan api.JoinRequest
	commits  chan commitSeen
	leaves   chan string
	// answers, when set (holdCommits), scripts each commit's answer.
	answers chan api.Code
}

type commitSeen struct {
	token string
	req   api.CommitRequest
}

func newFakeCoordinator(t *testing.T, grants func(join int) []api.Grant) *fakeCoordinator {
	f := &fakeCoordinator{
		grants:   grants,
		news:     make(chan api.HeartbeatResponse, 16),
		failures: make(chan api.Code, 16),
		joined:   make(chan api.JoinRequest, 16),
		commits:  make(chan commitSeen, 64),
		leaves:   make(chan string, 4),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/groups/{group}/join", f.join)
	mux.HandleFunc("POST /v1/groups/{group}/heartbeat", f.heartbeat)
	mux.HandleFunc("POST /v1/groups/{group}/commit", f.commit)
	mux.HandleFunc("POST /v1/groups/{group}/leave", f.leave)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func writeError(w http.ResponseWriter, code api.Code, msg string) {
	w.Header().Set("Content-Type", api.MediaJSON)
	if code == api.CodeUnauthorized || code == api.CodeTokenExpired {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	w.WriteHeader(code.Status())
	w.Write(api.EncodeError(code, msg, nil))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", api.MediaJSON)
	json.NewEncoder(w).Encode(v)
}

func bearer(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

func decodeStrict(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func (f *fakeCoordinator) join(w http.ResponseWriter, r *http.Request) {
	var req api.JoinRequest
	if err := decodeStrict(r, &req); err != nil {
		writeError(w, api.CodeBadRequest, err.Error())
		return
	}
	if bearer(r) != testCredential {
		writeError(w, api.CodeUnauthorized, "bad credential")
		return
	}
	f.mu.Lock()
	f.joins = append(f.joins, req)
	n := len(f.joins)
	f.token = fmt.Sprintf("member-token-%d", n)
	resp := api.JoinResponse{
		MemberID: fmt.Sprintf("member-%d", n), MemberToken: f.token,
		SessionTimeoutMs: req.SessionTimeoutMs, HeartbeatWaitMs: 3000, Grants: f.grants(n),
	}
	f.mu.Unlock()
	f.joined <- req
	writeJSON(w, resp)
}

func (f *fakeCoordinator) member(r *http.Request) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return bearer(r) == f.token
}

func (f *fakeCoordinator) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req api.HeartbeatRequest
	if err := decodeStrict(r, &req); err != nil {
		writeError(w, api.CodeBadRequest, err.Error())
		return
	}
	if !f.member(r) {
		writeError(w, api.CodeUnknownMember, "unknown member")
		return
	}
	f.mu.Lock()
	f.arrivals++
	arrival := f.arrivals
	f.mu.Unlock()
	wait := time.NewTimer(time.Duration(req.WaitMs) * time.Millisecond)
	defer wait.Stop()
	select {
	case n := <-f.news:
		f.mu.Lock()
		f.newsServedAt = arrival
		f.mu.Unlock()
		writeJSON(w, n)
	case code := <-f.failures:
		writeError(w, code, "scripted")
	case <-wait.C:
		writeJSON(w, api.HeartbeatResponse{})
	case <-r.Context().Done():
	}
}

// newsApplied reports whether the member sent a heartbeat after the one
// that carried the last scripted news, so it has stepped that news.
func (f *fakeCoordinator) newsApplied() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.newsServedAt > 0 && f.arrivals > f.newsServedAt
}

func (f *fakeCoordinator) commit(w http.ResponseWriter, r *http.Request) {
	var req api.CommitRequest
	if err := decodeStrict(r, &req); err != nil {
		writeError(w, api.CodeBadRequest, err.Error())
		return
	}
	if !f.member(r) {
		writeError(w, api.CodeUnknownMember, "unknown member")
		return
	}
	f.commits <- commitSeen{token: bearer(r), req: req}
	f.mu.Lock()
	answers := f.answers
	f.mu.Unlock()
	if answers != nil {
		select {
		case code := <-answers:
			if code != "" {
				writeError(w, code, "scripted")
				return
			}
		case <-r.Context().Done():
			return
		}
	}
	resp := api.CommitResponse{}
	for _, o := range req.Offsets {
		resp.Committed = append(resp.Committed, api.CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset})
	}
	writeJSON(w, resp)
}

// holdCommits makes every commit from now on wait for its answer to be
// scripted on the channel returned ("" accepts it), as while no
// coordinator answers.
func (f *fakeCoordinator) holdCommits() chan<- api.Code {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers = make(chan api.Code)
	return f.answers
}

// stopHolding answers every commit from now on at once again.
func (f *fakeCoordinator) stopHolding() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers = nil
}

func (f *fakeCoordinator) leave(w http.ResponseWriter, r *http.Request) {
	var req api.LeaveRequest
	if err := decodeStrict(r, &req); err != nil {
		writeError(w, api.CodeBadRequest, err.Error())
		return
	}
	if !f.member(r) {
		writeError(w, api.CodeUnknownMember, "unknown member")
		return
	}
	f.mu.Lock()
	f.token = ""
	f.mu.Unlock()
	f.leaves <- bearer(r)
	writeJSON(w, struct{}{})
}

// store is the records and capability state the fake gateways share.
type store struct {
	mu      sync.Mutex
	logs    map[Partition][]api.Record
	caps    map[string]Partition // valid fetch/produce capabilities
	revoked map[string]bool      // fenced: 409
	expires map[string]time.Time // 401 token_expired after
	changed chan struct{}        // closed and replaced on every change
	fetches []fetchSeen
}

type fetchSeen struct {
	gateway    string
	capability string
	partition  Partition
	offset     int64
	status     int // 0: cancelled by the client
	records    int
	accept     string // the request's Accept header
	maxBytes   string // the request's max_bytes
}

func newStore() *store {
	return &store{
		logs: map[Partition][]api.Record{}, caps: map[string]Partition{},
		revoked: map[string]bool{}, expires: map[string]time.Time{}, changed: make(chan struct{}),
	}
}

func (s *store) changeLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// append adds n records to p, values "p-offset".
func (s *store) append(p Partition, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		off := int64(len(s.logs[p]))
		s.logs[p] = append(s.logs[p], api.Record{
			Offset: off, Timestamp: 1700000000000 + off,
			Key: []byte(p.String()), Value: []byte(fmt.Sprintf("%s-%d", p, off)),
			Headers: []api.Header{{Key: "h", Value: []byte("v")}},
		})
	}
	s.changeLocked()
}

func (s *store) allow(capability string, p Partition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.caps[capability] = p
}

func (s *store) expire(capability string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expires[capability] = at
}

func (s *store) revoke(capability string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked[capability] = true
	s.changeLocked()
}

// records returns p's log.
func (s *store) records(p Partition) []api.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]api.Record(nil), s.logs[p]...)
}

// seen returns the fetches served so far.
func (s *store) seen() []fetchSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]fetchSeen(nil), s.fetches...)
}

// fakeGateway serves fetch and produce from a store; unavailable makes
// it answer 503 not_ready.
type fakeGateway struct {
	name  string
	srv   *httptest.Server
	store *store

	mu          sync.Mutex
	unavailable bool
	requests    int
}

const maxRecordsPerFetch = 4

func newFakeGateway(t *testing.T, name string, s *store) *fakeGateway {
	g := &fakeGateway{name: name, store: s}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/topics/{topic}/partitions/{p}/records", g.fetch)
	mux.HandleFunc("POST /v1/topics/{topic}/partitions/{p}/records", g.produce)
	g.srv = httptest.NewServer(mux)
	t.Cleanup(g.srv.Close)
	return g
}

func (g *fakeGateway) setUnavailable(v bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unavailable = v
}

func (g *fakeGateway) requestCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.requests
}

func pathPartition(r *http.Request) (Partition, error) {
	n, err := strconv.ParseInt(r.PathValue("p"), 10, 32)
	return Partition{Topic: r.PathValue("topic"), Partition: int32(n)}, err
}

// admit checks the capability; it returns the refusal code or "". Expiry
// is checked when a request is admitted (first), a fence all the time.
func (s *store) admitLocked(capability string, p Partition, first bool) api.Code {
	switch owner, ok := s.caps[capability]; {
	case !ok:
		return api.CodeUnauthorized
	case s.revoked[capability]:
		return api.CodeCapabilityRevoked
	case owner != p:
		return api.CodeForbidden
	}
	if exp, ok := s.expires[capability]; ok && first && time.Now().After(exp) {
		return api.CodeTokenExpired
	}
	return ""
}

func (g *fakeGateway) fetch(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.requests++
	down := g.unavailable
	g.mu.Unlock()
	if down {
		writeError(w, api.CodeNotReady, "not ready")
		return
	}
	p, err := pathPartition(r)
	offset, err2 := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	waitMs, err3 := strconv.ParseInt(r.URL.Query().Get("max_wait_ms"), 10, 64)
	if err != nil || err2 != nil || err3 != nil {
		writeError(w, api.CodeBadRequest, "bad query")
		return
	}
	seen := fetchSeen{gateway: g.name, capability: bearer(r), partition: p, offset: offset, accept: r.Header.Get("Accept"),
		maxBytes: r.URL.Query().Get("max_bytes")}
	defer func() { g.store.record(seen) }()
	deadline := time.NewTimer(time.Duration(waitMs) * time.Millisecond)
	defer deadline.Stop()
	for first := true; ; first = false {
		records, code, changed := g.store.read(seen.capability, p, offset, first)
		if code != "" {
			seen.status = code.Status()
			writeError(w, code, "refused")
			return
		}
		if len(records) > 0 {
			seen.status, seen.records = http.StatusOK, len(records)
			g.answer(w, r, records, offset)
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			seen.status = http.StatusOK
			g.answer(w, r, nil, offset)
			return
		case <-r.Context().Done():
			return // status 0: cancelled by the client
		}
	}
}

// record logs one answered (or cancelled) fetch.
func (s *store) record(f fetchSeen) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fetches = append(s.fetches, f)
}

// read admits and reads up to maxRecordsPerFetch records from offset.
func (s *store) read(capability string, p Partition, offset int64, first bool) ([]api.Record, api.Code, chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code := s.admitLocked(capability, p, first); code != "" {
		return nil, code, nil
	}
	log := s.logs[p]
	if offset >= int64(len(log)) {
		return nil, "", s.changed
	}
	end := min(int64(len(log)), offset+maxRecordsPerFetch)
	return append([]api.Record(nil), log[offset:end]...), "", s.changed
}

func (g *fakeGateway) answer(w http.ResponseWriter, r *http.Request, records []api.Record, offset int64) {
	next := offset
	if len(records) > 0 {
		next = records[len(records)-1].Offset + 1
	}
	if r.Header.Get("Accept") == api.MediaRecordBatch {
		w.Header().Set("Content-Type", api.MediaRecordBatch)
		w.Header().Set(api.HeaderNextOffset, strconv.FormatInt(next, 10))
		w.Header().Set(api.HeaderHighWatermark, strconv.FormatInt(next, 10))
		if len(records) > 0 {
			w.Write(encodeBatch(records))
		}
		return
	}
	if records == nil {
		records = []api.Record{}
	}
	w.Header().Set(api.HeaderNextOffset, strconv.FormatInt(next, 10))
	w.Header().Set(api.HeaderHighWatermark, strconv.FormatInt(next, 10))
	writeJSON(w, api.FetchResponse{Records: records, NextOffset: next, HighWatermark: next})
}

func (g *fakeGateway) produce(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.requests++
	down := g.unavailable
	g.mu.Unlock()
	if down {
		writeError(w, api.CodeNotReady, "not ready")
		return
	}
	p, err := pathPartition(r)
	var req api.ProduceRequest
	if err != nil || decodeStrict(r, &req) != nil {
		writeError(w, api.CodeBadRequest, "bad request")
		return
	}
	s := g.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if code := s.admitLocked(bearer(r), p, true); code != "" {
		writeError(w, code, "refused")
		return
	}
	base := int64(len(s.logs[p]))
	for i, rec := range req.Records {
		s.logs[p] = append(s.logs[p], api.Record{Offset: base + int64(i), Key: rec.Key, Value: rec.Value, Headers: rec.Headers})
	}
	s.changeLocked()
	writeJSON(w, api.ProduceResponse{BaseOffset: base, Count: len(req.Records)})
}

// encodeBatch renders records as one uncompressed Kafka record batch
// (magic 2), as a gateway passes them through.
func encodeBatch(records []api.Record) []byte {
	first := records[0]
	var body []byte
	for _, r := range records {
		rec := kmsg.Record{
			TimestampDelta64: r.Timestamp - first.Timestamp, OffsetDelta: int32(r.Offset - first.Offset),
			Key: r.Key, Value: r.Value,
		}
		for _, h := range r.Headers {
			rec.Headers = append(rec.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1) // everything after a 1-byte length 0
		body = rec.AppendTo(body)
	}
	last := records[len(records)-1]
	batch := kmsg.RecordBatch{
		FirstOffset: first.Offset, Magic: 2, LastOffsetDelta: int32(last.Offset - first.Offset),
		FirstTimestamp: first.Timestamp, MaxTimestamp: last.Timestamp,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(records)), Records: body,
	}
	b := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12))
	crc := crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(b[17:21], crc)
	return b
}
