package coordinator

// Behavior: the admin audit log. Every admin request that changes
// something (any method but GET) and passed authentication is recorded
// once its answer is written: who made it, what (the route's action),
// the target (the path's group/topic/partition, member or jti, or what
// the handler names), details of what it set where the target does not
// say (a QoS override's selector and settings), the reason the request
// gave, and the result (ok,
// or the error code) with the HTTP status. Each entry is
//   - a structured zap line, "admin action", at info (warn when refused),
//     the durable record wherever the logs are shipped;
//   - kept in memory, the newest audit_entries_max of them, for
//     GET /v1/admin/audit?before=&limit= (newest first; next_before
//     resumes). The memory log starts empty at every start: it is the
//     view since this coordinator started, the log lines are the record.
// Seqs never repeat across restarts of one coordinator: the first entry
// of a run takes the time (unix microseconds) of that run's first action
// and each later one the next integer (auditLog.add), so a before= from
// an earlier run pages into nothing of this one rather than into another
// history.
// Who is never a secret: "token:" and the first 12 hex digits of the
// admin token's SHA-256 (the digest configured in admin_token_hashes,
// which names the token without revealing it), "cert:" and the verified
// client certificate's name, or "console" for the console's in-process
// calls on behalf of a logged-in operator. Reasons are cut to 256 bytes.
// A revoke's or deny's reason holding a control character is refused
// (400, text.go: withReason) before the action runs; the refusal is
// recorded with the reason as sent (clients escape what they print).

import (
	"crypto/tls"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
)

// auditReasonMax bounds the reason kept per entry; auditDetailsMax its
// details.
const (
	auditReasonMax  = 256
	auditDetailsMax = 512
)

// AuditEntry is one admin action.
type AuditEntry struct {
	Seq    uint64 `json:"seq"`
	At     string `json:"at"`
	Who    string `json:"who"`
	Action string `json:"action"`
	Target string `json:"target,omitempty"`
	// Details is what the action set when its target does not say it (a
	// QoS override's id names nothing it throttles): at most
	// auditDetailsMax bytes.
	Details string `json:"details,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Result  string `json:"result"`
	Status  int    `json:"status"`
}

// AuditResponse is GET /v1/admin/audit: entries newest first; NextBefore,
// when set, is the before= of the next (older) page.
type AuditResponse struct {
	Entries    []AuditEntry `json:"entries"`
	NextBefore uint64       `json:"next_before,omitempty"`
}

// auditLog is the bounded in-memory log: a ring of the newest entries.
type auditLog struct {
	mu      sync.Mutex
	entries []AuditEntry // ring, len ≤ max
	next    int          // where the next entry goes once the ring is full
	seq     uint64       // the last entry's; 0 before the run's first
	max     int
}

func newAuditLog(max int) *auditLog { return &auditLog{max: max} }

// add keeps e, made at now, under the next seq. The run's first seq is
// now in unix microseconds, then one more per entry. Why the clock and
// not a high-water mark in the store: the log is memory by design (the
// "admin action" lines are the durable record), and a persisted mark
// would cost a synchronous store write — a Kafka transaction on
// replicas — per admin action, or per block of seqs. A run's seqs stay
// below the next run's first as long as it recorded less than one entry
// per microsecond on average (an admin action is an authenticated HTTP
// request: far slower) and the clock does not go back across the
// restart by more than the time the restart took. Microseconds stay
// below 2^53 (until the year 2255), so JSON readers that hold numbers as
// doubles (JavaScript, jq) read every seq exactly.
func (l *auditLog) add(e AuditEntry, now time.Time) AuditEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seq == 0 {
		l.seq = uint64(max(now.UnixMicro(), 1)) - 1
	}
	l.seq++
	e.Seq = l.seq
	if len(l.entries) < l.max {
		l.entries = append(l.entries, e)
	} else {
		l.entries[l.next] = e
		l.next = (l.next + 1) % l.max
	}
	return e
}

// page returns at most limit entries with seq < before (0: from the
// newest) that f keeps, newest first, and whether an older one f keeps
// follows — so next_before never leads to an empty page. A filter scans
// at most the whole ring (audit_entries_max) under the lock.
func (l *auditLog) page(before uint64, limit int, f *auditFilter) ([]AuditEntry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []AuditEntry{}
	n := len(l.entries)
	for i := range n {
		e := &l.entries[(l.next+n-1-i)%n] // newest first
		if (before != 0 && e.Seq >= before) || !f.keeps(e) {
			continue
		}
		if len(out) == limit {
			return out, true
		}
		out = append(out, *e)
	}
	return out, false
}

// auditTargetKey is the user value a handler sets to name its target
// when the path does not (a QoS override's id, a client's name).
type auditTargetKey struct{}

func setAuditTarget(ctx *fasthttp.RequestCtx, target string) {
	ctx.SetUserValue(auditTargetKey{}, target)
}

// auditDetailsKey is the user value a handler sets to say what its
// action set (AuditEntry.Details).
type auditDetailsKey struct{}

func setAuditDetails(ctx *fasthttp.RequestCtx, details string) {
	ctx.SetUserValue(auditDetailsKey{}, details)
}

// recordAdmin records the admin request ctx just answered, unless it only
// read.
func (c *Coordinator) recordAdmin(ctx *fasthttp.RequestCtx, params []string) {
	if ctx.IsGet() || ctx.IsHead() {
		return
	}
	now := c.now()
	e := AuditEntry{
		At: timeText(now), Who: adminWho(ctx, c),
		Action: c.actionOf(ctx), Target: strings.Join(params, "/"),
		Status: ctx.Response.StatusCode(), Result: "ok",
	}
	if t, ok := ctx.UserValue(auditTargetKey{}).(string); ok && t != "" {
		e.Target = t
	}
	if d, ok := ctx.UserValue(auditDetailsKey{}).(string); ok {
		e.Details = cut(d, auditDetailsMax)
	}
	if reason, ok := bodyReason(ctx); ok {
		e.Reason = cut(reason, auditReasonMax)
	}
	if e.Status >= 300 {
		var eb api.ErrorBody
		e.Result = strconv.Itoa(e.Status)
		if json.Unmarshal(ctx.Response.Body(), &eb) == nil && eb.Error.Code != "" {
			e.Result = string(eb.Error.Code)
		}
	}
	e = c.audit.add(e, now)
	level := zap.InfoLevel
	if e.Status >= 300 {
		level = zap.WarnLevel
	}
	c.log.Log(level, "admin action", zap.Uint64("seq", e.Seq), zap.String("who", e.Who), zap.String("action", e.Action),
		zap.String("target", e.Target), zap.String("details", e.Details), zap.String("reason", e.Reason), zap.String("result", e.Result), zap.Int("status", e.Status))
}

// bodyReason is the reason of an admin request's JSON body, if any.
func bodyReason(ctx *fasthttp.RequestCtx) (string, bool) {
	var body struct {
		Reason string `json:"reason"`
	}
	if json.Unmarshal(ctx.PostBody(), &body) != nil {
		return "", false
	}
	return body.Reason, true
}

// withReason wraps the handler of an action whose body gives a reason
// (RevokeRequest, DenyRequest): a reason holding a control character is
// refused, 400 naming the field (text.go), before the handler runs. Any
// other action's body naming a reason is refused by its handler as an
// unknown field, or, read by nobody else, recorded escaped.
func withReason(h handler) handler {
	return func(ctx *fasthttp.RequestCtx, params []string) {
		if reason, ok := bodyReason(ctx); ok && api.IsJSON(ctx.Request.Header.ContentType()) && !checkTexts(ctx, [2]string{"reason", reason}) {
			return
		}
		h(ctx, params)
	}
}

// actionOf names the route ctx matched, without its admin_ prefix.
func (c *Coordinator) actionOf(ctx *fasthttp.RequestCtx) string {
	segments, method := splitPath(string(ctx.Path())), string(ctx.Method())
	for _, rt := range c.routes.routes {
		if _, ok := match(rt.pattern, segments); ok && rt.method == method {
			return strings.TrimPrefix(rt.name, "admin_")
		}
	}
	return method + " " + string(ctx.Path())
}

// adminWho names the admin behind ctx without revealing a secret.
func adminWho(ctx *fasthttp.RequestCtx, c *Coordinator) string {
	if w, ok := ctx.UserValue(consoleCaller{}).(consoleWho); ok {
		return w.String()
	}
	var who []string
	if name := certificateName(ctx.TLSConnectionState()); name != "" {
		who = append(who, "cert:"+name)
	}
	if token := bearer(ctx); token != nil && c.adminTokens.matches(token) {
		who = append(who, "token:"+HashSecret(string(token))[:12])
	}
	if len(who) == 0 {
		return "anonymous"
	}
	return strings.Join(who, " ")
}

// certificateName is the verified client certificate's common name, or
// its first DNS name, or "".
func certificateName(st *tls.ConnectionState) string {
	if st == nil || len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return ""
	}
	leaf := st.VerifiedChains[0][0]
	if leaf.Subject.CommonName != "" {
		return leaf.Subject.CommonName
	}
	if len(leaf.DNSNames) > 0 {
		return leaf.DNSNames[0]
	}
	return ""
}

// cut is s limited to n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Behavior: GET /v1/admin/audit — bearer: an admin token.
// The newest admin actions, newest first (AuditResponse): at most limit
// (1..describe_page_max, default 100) with seq below before, of those
// the filters keep (auditFilter: action, who, target, exclude_action,
// exclude_target); next_before when an older entry they keep follows, so
// paging with the same filters walks every kept entry once. before and
// limit are given at most once; a filter parameter once per value
// (action=a&action=b: a comma is part of a value, as in a group name or
// a certificate's). 400 naming the parameter for a bad before or limit,
// an empty filter value, one over 256 bytes, more than 16 values of one
// filter, or an unknown parameter.
func (c *Coordinator) handleAdminAudit(ctx *fasthttp.RequestCtx, _ []string) {
	q, problem := c.parseAuditQuery(ctx.QueryArgs())
	if problem != "" {
		writeError(ctx, api.CodeBadRequest, problem)
		return
	}
	entries, more := c.audit.page(q.before, q.limit, &q.filter)
	out := AuditResponse{Entries: entries}
	if more {
		out.NextBefore = entries[len(entries)-1].Seq
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}
