package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
)

// Code is a machine-readable error code carried in every error body as
// {"error":{"code":...,"message":...}}.
type Code string

// The reject table, in the style of franz-go's kerr: callers decide
// retry / refresh / rejoin / stop from Code, never from message text.
const (
	CodeBadRequest   Code = "bad_request"
	CodeUnauthorized Code = "unauthorized"  // missing or invalid token
	CodeTokenExpired Code = "token_expired" // valid signature, lease over
	CodeForbidden    Code = "forbidden"     // token does not cover topic/partition/op/offset/group
	// CodeClientCertificateRequired: the route needs a verified client
	// certificate (mTLS) with an allowed name, and the connection has none.
	CodeClientCertificateRequired Code = "client_certificate_required"
	CodeNotFound                  Code = "not_found" // unknown route, topic or partition
	CodeMethodNotAllowed          Code = "method_not_allowed"
	CodeCapabilityRevoked         Code = "capability_revoked"    // fenced epoch, denied jti, revoked member
	CodeStaleEpoch                Code = "stale_epoch"           // commit with a capability that is not current
	CodeInconsistentAssign        Code = "inconsistent_assignor" // join names another assignor than the group's
	CodeUnknownMember             Code = "unknown_member"        // member expired or never joined: rejoin
	CodeOffsetRegression          Code = "offset_regression"     // commit below the committed offset
	CodeConflict                  Code = "conflict"
	// CodeLimitExceeded: the request would take the server past a
	// configured bound (members per group, groups per credential, the
	// member state budget); details name the limit and its value.
	CodeLimitExceeded Code = "limit_exceeded"
	// CodeUnsupportedMediaType: a JSON route got a body that is not
	// Content-Type: application/json.
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	CodeBodyTooLarge         Code = "body_too_large"
	CodeOffsetOutOfRange     Code = "offset_out_of_range"
	CodeRateLimited          Code = "rate_limited"
	CodeTooManyFetches       Code = "too_many_fetches" // one holder's in-flight fetches at its cap
	CodeOverloaded           Code = "overloaded"       // the gateway's in-flight fetches at its cap: try another
	CodeHeadersTooLarge      Code = "headers_too_large"
	CodeBrokerError          Code = "broker_error"
	CodeNotReady             Code = "not_ready"   // gateway before first sync, coordinator starting
	CodeOutOfSync            Code = "out_of_sync" // gateway self-fenced: no sync for sync_timeout
	CodeUnavailable          Code = "unavailable"
	// CodeNotLeader: this coordinator replica does not lead the shard
	// the call belongs to (421 Misdirected Request); the body's "leader"
	// detail and the Capgate-Leader header (HeaderLeader) name the leader's
	// base URL ("" while unknown). Clients call it instead, at once.
	CodeNotLeader Code = "not_leader"
	CodeInternal  Code = "internal"

	// CodeGatewayIdentityMismatch: a sync request names a gateway id
	// that is not its client certificate's common name or one of its DNS
	// names (tls.sync_bind_identity).
	CodeGatewayIdentityMismatch Code = "gateway_identity_mismatch"

	// CodeNotAcceptable: the request's Accept header refuses every media
	// type the route answers in (Negotiate); details list them.
	CodeNotAcceptable Code = "not_acceptable"

	// CodeRecordTooLarge: a produced record is larger than Kafka takes
	// (the producer's batch limit, or the broker's message.max.bytes /
	// the topic's max.message.bytes): sending it again cannot help.
	CodeRecordTooLarge Code = "record_too_large"
)

// HeaderLeader carries the leading replica's base URL on a not_leader
// answer.
const HeaderLeader = "Capgate-Leader"

// Reject is one row of the table.
type Reject struct {
	Status    int
	Retriable bool // the same request may succeed later without a new token
}

var table = map[Code]Reject{
	CodeBadRequest:                {http.StatusBadRequest, false},
	CodeUnauthorized:              {http.StatusUnauthorized, false},
	CodeTokenExpired:              {http.StatusUnauthorized, false},
	CodeForbidden:                 {http.StatusForbidden, false},
	CodeClientCertificateRequired: {http.StatusForbidden, false},
	CodeGatewayIdentityMismatch:   {http.StatusForbidden, false},
	CodeNotFound:                  {http.StatusNotFound, false},
	CodeMethodNotAllowed:          {http.StatusMethodNotAllowed, false},
	CodeNotAcceptable:             {http.StatusNotAcceptable, false},
	CodeCapabilityRevoked:         {http.StatusConflict, false},
	CodeStaleEpoch:                {http.StatusConflict, false},
	CodeInconsistentAssign:        {http.StatusConflict, false},
	CodeUnknownMember:             {http.StatusConflict, false},
	CodeOffsetRegression:          {http.StatusConflict, false},
	CodeConflict:                  {http.StatusConflict, false},
	CodeLimitExceeded:             {http.StatusConflict, false},
	CodeUnsupportedMediaType:      {http.StatusUnsupportedMediaType, false},
	CodeBodyTooLarge:              {http.StatusRequestEntityTooLarge, false},
	CodeRecordTooLarge:            {http.StatusRequestEntityTooLarge, false},
	CodeOffsetOutOfRange:          {http.StatusRequestedRangeNotSatisfiable, false},
	CodeRateLimited:               {http.StatusTooManyRequests, true},
	CodeTooManyFetches:            {http.StatusTooManyRequests, true},
	CodeOverloaded:                {http.StatusServiceUnavailable, true},
	CodeHeadersTooLarge:           {http.StatusRequestHeaderFieldsTooLarge, false},
	CodeBrokerError:               {http.StatusBadGateway, true},
	CodeNotReady:                  {http.StatusServiceUnavailable, true},
	CodeOutOfSync:                 {http.StatusServiceUnavailable, true},
	CodeUnavailable:               {http.StatusServiceUnavailable, true},
	CodeNotLeader:                 {http.StatusMisdirectedRequest, true},
	CodeInternal:                  {http.StatusInternalServerError, true},
}

// Codes lists every code of the table, sorted.
func Codes() []string {
	out := make([]string, 0, len(table))
	for c := range table {
		out = append(out, string(c))
	}
	sort.Strings(out)
	return out
}

// Lookup returns the row for code; unknown codes map to 500, retriable.
func Lookup(code Code) Reject {
	if r, ok := table[code]; ok {
		return r
	}
	return Reject{http.StatusInternalServerError, true}
}

// Status is Lookup(code).Status.
func (c Code) Status() int { return Lookup(c).Status }

// IsRetriable reports whether a request rejected with code may be retried
// as is, after a pause.
func IsRetriable(code Code) bool { return Lookup(code).Retriable }

// NeedsRefresh reports whether the caller must obtain a fresh capability
// (heartbeat / rejoin) before retrying.
func NeedsRefresh(code Code) bool {
	switch code {
	case CodeTokenExpired, CodeCapabilityRevoked, CodeStaleEpoch:
		return true
	}
	return false
}

// NeedsRejoin reports whether the member's session is gone.
func NeedsRejoin(code Code) bool { return code == CodeUnknownMember }

// DetailRemoved is the error-body detail of an unknown_member answer
// that says why the coordinator removed the member, when it knows:
// RemovedRevoked for a member an administrator revoked (revoke-member,
// revoke-capability of its credential, group delete --force) — the
// held heartbeat answered at the removal and every later request with
// its member token. Absent otherwise (a session that expired, a member
// that left): a client then tells the cases apart as best it can.
const DetailRemoved = "removed"

// RemovedRevoked is DetailRemoved's value for a member an administrator
// revoked.
const RemovedRevoked = "revoked"

// RemovedPatternUnrestored is DetailRemoved's value for a member a
// restart or takeover restored without its topic_pattern's topics (its
// tenant's patterns past what a restore matches): removed at its next
// heartbeat; it joins again, and the join matches its pattern.
const RemovedPatternUnrestored = "topic_pattern_unrestored"

// Error is the body of every error response.
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"-"`
}

// ErrorBody wraps Error as {"error":{...}}.
type ErrorBody struct {
	Error Error `json:"error"`
}

// MarshalJSON flattens Details next to code and message.
func (e Error) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(e.Details)+2)
	for k, v := range e.Details {
		m[k] = v
	}
	m["code"] = e.Code
	m["message"] = e.Message
	return json.Marshal(m)
}

// UnmarshalJSON reads code, message and keeps any other field in Details.
func (e *Error) UnmarshalJSON(b []byte) error {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if c, ok := m["code"].(string); ok {
		e.Code = Code(c)
	}
	if s, ok := m["message"].(string); ok {
		e.Message = s
	}
	delete(m, "code")
	delete(m, "message")
	if len(m) > 0 {
		e.Details = m
	}
	return nil
}

// Error implements error so a decoded body can be returned as one.
func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// EncodeError renders the JSON error body for code.
func EncodeError(code Code, message string, details map[string]any) []byte {
	b, _ := json.Marshal(ErrorBody{Error: Error{Code: code, Message: message, Details: details}})
	return b
}

// LeaderOf is the leader a not_leader answer names: its Capgate-Leader
// header when set, else the body's "leader" detail ("" when neither).
func LeaderOf(header string, e Error) string {
	if header != "" {
		return header
	}
	leader, _ := e.Details["leader"].(string)
	return leader
}

// TopicDetailsHint answers a request for a topic's details where there
// is none (GET /v1/topics/{topic} at a gateway or the coordinator: it was
// told "send this to a gateway", which serves only records; newuser5).
const TopicDetailsHint = "a topic's partitions and offsets are an admin read at the coordinator: GET /v1/admin/topics/{topic} (and /v1/admin/topics lists them), capgate admin topic TOPIC"

// TopicDetailsPath reports whether path is /v1/topics or /v1/topics/{topic}
// (a slash at the end too): a request for a topic's details.
func TopicDetailsPath(path []byte) bool {
	rest, ok := bytes.CutPrefix(bytes.TrimSuffix(path, []byte("/")), []byte("/v1/topics"))
	return ok && (len(rest) == 0 || (rest[0] == '/' && bytes.IndexByte(rest[1:], '/') < 0))
}
