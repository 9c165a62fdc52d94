package coordinator

// Behavior: GET /v1/admin/qos — bearer: an admin token. The overrides in
// force, sorted by id: {"overrides":[api.QoSOverride]}.
//
// Behavior: PUT /v1/admin/qos — bearer: an admin token. Body QoSRequest: a
// selector (at least one of group, topic, partition, holder, jti: else
// 400 saying so, details field selector), a log
// level (debug, info, warn, error), a monitor tag (≤ 64 bytes), a byte
// rate, and ttl_ms > 0 and at most groups.limits.qos_ttl_max (24h by
// default; above it 400 naming the ttl asked, the bound and the setting,
// with details limit and max, in ms — refused, not shortened); each
// refusal names the value given. The override is pushed to every gateway on the
// sync channel and kept until now + ttl; a later PUT with the same id (by
// default: the same selector) merges into it: the fields it sets replace
// the earlier ones, the others stay, the ttl starts anew. clear lists
// fields to empty — log_level, monitor (an empty one keeps the earlier
// value) — else 400 naming the value; a field both set and cleared is 400.
// The audit entry's details say the selector and what was set
// (qosAuditDetails): its target, qos:<id>, names nothing it throttles. Answers the
// resulting api.QoSOverride. 400 for a selector partition below 0, an
// id or selector field longer than qosFieldBytes, or a control character
// in the id, a selector field or the monitor tag (details field: they are
// listed back, and the monitor tag is a label of every gateway's
// /metrics; text.go); 409 limit_exceeded for
// a new id while groups.limits.qos_overrides overrides are in force
// (nothing changes; a known id always merges).

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

func (c *Coordinator) handleAdminQoSList(ctx *fasthttp.RequestCtx, _ []string) {
	var overrides []api.QoSOverride
	if err := c.query(func(m *group.Machine) { overrides = m.QoS() }); err != nil {
		writeMachineError(ctx, nil, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, QoSListResponse{Overrides: overrides})
}

func (c *Coordinator) handleAdminQoS(ctx *fasthttp.RequestCtx, _ []string) {
	var req QoSRequest
	if !decodeBody(ctx, &req, false) {
		return
	}
	switch req.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		writeError(ctx, api.CodeBadRequest, fmt.Sprintf("log_level must be debug, info, warn or error, got %.32q", req.LogLevel))
		return
	}
	if s := req.Selector; s.Group == "" && s.Topic == "" && s.Partition == nil && s.Holder == "" && s.JTI == "" {
		writeErrorDetails(ctx, api.CodeBadRequest, "selector: name at least one of group, topic, partition, holder, jti (the override applies to what matches them all)",
			map[string]any{"field": "selector"})
		return
	}
	if msg := checkQoSNames(req); msg != "" {
		writeError(ctx, api.CodeBadRequest, msg)
		return
	}
	s := req.Selector
	if !checkTexts(ctx, [2]string{"id", req.ID}, [2]string{"selector.group", s.Group}, [2]string{"selector.topic", s.Topic},
		[2]string{"selector.holder", s.Holder}, [2]string{"selector.jti", s.JTI}, [2]string{"monitor", req.Monitor}) {
		return
	}
	bps := int64(0)
	if req.MaxBytesPerSec != nil {
		bps = *req.MaxBytesPerSec
	}
	switch {
	case len(req.Monitor) > 64:
		writeError(ctx, api.CodeBadRequest, fmt.Sprintf("monitor: at most 64 bytes, got %d", len(req.Monitor)))
		return
	case req.TTLMs <= 0:
		writeErrorDetails(ctx, api.CodeBadRequest, fmt.Sprintf("ttl_ms must be > 0 (how long the override lasts, at most %d: coordinator.groups.limits.qos_ttl_max, %s), got %d",
			c.cfg.Groups.Limits.QoSTTLMax.Milliseconds(), c.cfg.Groups.Limits.QoSTTLMax, req.TTLMs), map[string]any{"field": "ttl_ms", "min": 1})
		return
	case bps < 0:
		writeError(ctx, api.CodeBadRequest, fmt.Sprintf("max_bytes_per_sec must be >= 0 (0 removes a rate), got %d", bps))
		return
	}
	clearLevel, clearMonitor, problem := qosClears(req)
	if problem != "" {
		writeErrorDetails(ctx, api.CodeBadRequest, problem, map[string]any{"field": "clear"})
		return
	}
	bound := ttlBound{max: c.cfg.Groups.Limits.QoSTTLMax, key: "coordinator.groups.limits.qos_ttl_max", lasts: "an override"}
	if problem, details := bound.refusal(req.TTLMs); problem != "" {
		writeErrorDetails(ctx, api.CodeBadRequest, problem, details)
		return
	}
	override := api.QoSOverride{
		ID: req.ID, Selector: req.Selector, LogLevel: req.LogLevel, Monitor: req.Monitor,
		MaxBytesPerSec: bps, Until: c.now().Add(msDuration(req.TTLMs)).Unix(),
	}
	if override.ID == "" {
		override.ID = selectorID(req.Selector)
	}
	setAuditTarget(ctx, "qos:"+override.ID)
	setAuditDetails(ctx, qosAuditDetails(req))
	keep := group.QoSKeep{LogLevel: req.LogLevel == "" && !clearLevel, Monitor: req.Monitor == "" && !clearMonitor, MaxBytesPerSec: req.MaxBytesPerSec == nil}
	msg, err := c.call(func(ref group.Ref) group.Event { return group.PutQoS{Ref: ref, Override: override, Keep: keep} })
	reply, ok := msg.(group.QoSReply)
	if !ok {
		writeMachineError(ctx, msg, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, reply.Override)
}

// qosFieldBytes bounds an override's id and each selector string: every
// override is kept by the coordinator and every gateway until it expires.
const qosFieldBytes = 255

// checkQoSNames refuses what no capability can match (a partition below
// 0) and names longer than qosFieldBytes; "" when req is fine.
func checkQoSNames(req QoSRequest) string {
	s := req.Selector
	if s.Partition != nil && *s.Partition < 0 {
		return fmt.Sprintf("selector.partition must be >= 0, got %d", *s.Partition)
	}
	for _, f := range [][2]string{{"id", req.ID}, {"selector.group", s.Group}, {"selector.topic", s.Topic},
		{"selector.holder", s.Holder}, {"selector.jti", s.JTI}} {
		if len(f[1]) > qosFieldBytes {
			return fmt.Sprintf("%s longer than %d bytes", f[0], qosFieldBytes)
		}
	}
	return ""
}

// selectorID is a stable id for a selector: the first 16 bytes of the
// SHA-256 of its JSON, hex.
func selectorID(s api.QoSSelector) string {
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// qosClears reads req.Clear: which of log_level and monitor it empties,
// or a problem naming what is refused (an unknown field, one also set).
func qosClears(req QoSRequest) (level, monitor bool, problem string) {
	if len(req.Clear) > 2 {
		return false, false, fmt.Sprintf("clear names at most log_level and monitor, got %d fields", len(req.Clear))
	}
	for _, f := range req.Clear {
		switch f {
		case "log_level":
			level = true
		case "monitor":
			monitor = true
		default:
			return false, false, fmt.Sprintf("clear: log_level or monitor, got %.32q", f)
		}
	}
	switch {
	case level && req.LogLevel != "":
		return false, false, "clear names log_level, which the request also sets"
	case monitor && req.Monitor != "":
		return false, false, "clear names monitor, which the request also sets"
	}
	return level, monitor, ""
}

// qosAuditDetails says what a QoS request asks, for its audit entry:
// the selector, then what it sets, clears or ends ("topic=demo
// partition=3: max_bytes_per_sec=1000 for 10m0s"). What it leaves out
// stays as it was.
func qosAuditDetails(req QoSRequest) string {
	sel := strings.Join(req.Selector.Parts(), " ")
	if req.TTLMs == 1 { // capgate admin qos end, the console's End
		return sel + ": ended"
	}
	var set []string
	if req.LogLevel != "" {
		set = append(set, "log_level="+req.LogLevel)
	}
	if req.Monitor != "" {
		set = append(set, "monitor="+req.Monitor)
	}
	if req.MaxBytesPerSec != nil {
		if *req.MaxBytesPerSec == 0 {
			set = append(set, "max_bytes_per_sec=0 (lifted)")
		} else {
			set = append(set, "max_bytes_per_sec="+strconv.FormatInt(*req.MaxBytesPerSec, 10))
		}
	}
	for _, f := range req.Clear {
		set = append(set, f+" cleared")
	}
	if len(set) == 0 {
		set = append(set, "unchanged")
	}
	return sel + ": " + strings.Join(set, ", ") + " for " + msDuration(req.TTLMs).String()
}
