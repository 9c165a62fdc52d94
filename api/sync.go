package api

// The sync channel: GET /v1/sync?gateway={id}&after={seq}&wait_ms={n},
// bearer: the sync credential. The coordinator holds the poll until it has
// something newer than after (or wait_ms passes, answering with no changes
// and the current seq). Polling with after=S acknowledges S: the gateway
// promises it applied every update up to S and cancelled the in-flight
// fetches they supersede.
//
// A response with Reset:true is a full snapshot: the gateway replaces its
// view. Otherwise it is a delta to apply on top of the view at after.
// Applying the same update twice is harmless (fences only rise, deny-list
// entries are sets).

import "strconv"

// SyncResponse is one sync answer.
type SyncResponse struct {
	Seq            uint64          `json:"seq"`
	Reset          bool            `json:"reset,omitempty"`
	Keys           []JWK           `json:"keys,omitempty"`
	Fences         []Fence         `json:"fences,omitempty"`
	Denied         []Denied        `json:"denied,omitempty"`
	RevokedMembers []RevokedMember `json:"revoked_members,omitempty"`
	QoS            []QoSOverride   `json:"qos,omitempty"`
	// Settings are the coordinator's own, on resets: what a gateway
	// checks tokens with and how long the coordinator waits for it, so no
	// gateway repeats them in its configuration.
	Settings *CoordinatorSettings `json:"settings,omitempty"`
}

// CoordinatorSettings are what gateways learn from the coordinator on
// every reset: the iss and aud every capability carries, the token
// checks' leeway and lease cap, and the coordinator's gateway_timeout and
// max_clock_skew (a gateway refuses readiness while its own sync_timeout
// is not below gateway_timeout − max_clock_skew).
type CoordinatorSettings struct {
	Issuer           string `json:"issuer"`
	Audience         string `json:"audience"`
	LeewayMs         int64  `json:"leeway_ms"`
	MaxLeaseMs       int64  `json:"max_lease_ms"`
	GatewayTimeoutMs int64  `json:"gateway_timeout_ms"`
	MaxClockSkewMs   int64  `json:"max_clock_skew_ms"`
	// SilentGateways is groups.silent_gateways: "fence" (or empty: a
	// gateway refuses everything once sync_timeout passed without a good
	// poll) or "serve" (it keeps serving unexpired capabilities; the
	// coordinator never counts its silence as safety).
	SilentGateways string `json:"silent_gateways,omitempty"`
	// InternalTopics are the coordinator's state and snapshot topics
	// (kafka_state.topic), which no client is granted: the gateways'
	// Kafka listeners hide them from Metadata and refuse their offsets,
	// as they do Kafka's own ("__" topics).
	InternalTopics []string `json:"internal_topics,omitempty"`
}

// Fence says: capabilities of group for topic/partition with an epoch
// below Epoch are revoked.
type Fence struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Epoch     uint64 `json:"epoch"`
}

// Denied revokes one capability id (and every capability chained from it)
// until Exp (unix seconds), after which it has expired anyway.
type Denied struct {
	JTI string `json:"jti"`
	Exp int64  `json:"exp"`
}

// RevokedMember revokes every capability whose grp/sub are Group/MemberID,
// until Until (unix seconds).
type RevokedMember struct {
	Group    string `json:"group"`
	MemberID string `json:"member_id"`
	Until    int64  `json:"until"`
}

// QoSSelector picks which capabilities an override applies to; empty
// fields match anything, at least one must be set.
type QoSSelector struct {
	Group     string `json:"group,omitempty"`
	Topic     string `json:"topic,omitempty"`
	Partition *int32 `json:"partition,omitempty"`
	Holder    string `json:"holder,omitempty"` // a capability's sub, a client credential's tenant (gateway/authz.HolderID)
	JTI       string `json:"jti,omitempty"`
}

// Parts are the selector's fields that are set, as "name=value": group,
// topic, holder, jti, then partition — how the CLI, the console and the
// audit log write a selector.
func (s QoSSelector) Parts() []string {
	var parts []string
	for _, kv := range [][2]string{{"group", s.Group}, {"topic", s.Topic}, {"holder", s.Holder}, {"jti", s.JTI}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if s.Partition != nil {
		parts = append(parts, "partition="+strconv.Itoa(int(*s.Partition)))
	}
	return parts
}

// QoSOverride changes the log level, monitor tag or byte rate of matching
// capabilities until Until (unix seconds). ID identifies the override so a
// later one with the same ID replaces it.
type QoSOverride struct {
	ID             string      `json:"id"`
	Selector       QoSSelector `json:"selector"`
	LogLevel       string      `json:"log_level,omitempty"`
	Monitor        string      `json:"monitor,omitempty"`
	MaxBytesPerSec int64       `json:"max_bytes_per_sec,omitempty"`
	Until          int64       `json:"until"`
}

// JWK is an RFC 7517/8037 OKP public key (Ed25519).
type JWK struct {
	Kty string `json:"kty"` // "OKP"
	Crv string `json:"crv"` // "Ed25519"
	X   string `json:"x"`   // base64url public key
	Kid string `json:"kid"`
	Use string `json:"use,omitempty"` // "sig"
	Alg string `json:"alg,omitempty"` // "EdDSA"
}

// JWKS is GET /.well-known/jwks.json.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// FetchResponse is GET /v1/topics/{t}/partitions/{p}/records in JSON.
type FetchResponse struct {
	Records       []Record `json:"records"`
	NextOffset    int64    `json:"next_offset"`
	HighWatermark int64    `json:"high_watermark"`
}

// Record is one Kafka record; Key and Value are base64 in JSON ([]byte).
type Record struct {
	Offset    int64    `json:"offset"`
	Timestamp int64    `json:"timestamp"` // unix ms
	Key       []byte   `json:"key"`
	Value     []byte   `json:"value"`
	Headers   []Header `json:"headers,omitempty"`
}

// Header is one record header; Value is base64 in JSON.
type Header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// ProduceRequest is POST /v1/topics/{t}/partitions/{p}/records.
type ProduceRequest struct {
	Records []ProduceRecord `json:"records"`
}

// ProduceRecord is one record to produce; Key and Value are base64.
type ProduceRecord struct {
	Key     []byte   `json:"key,omitempty"`
	Value   []byte   `json:"value"`
	Headers []Header `json:"headers,omitempty"`
}

// ProduceResponse gives the offset of the first produced record.
type ProduceResponse struct {
	BaseOffset int64 `json:"base_offset"`
	Count      int   `json:"count"`
}

// Media types of the fetch API.
const (
	MediaJSON        = "application/json"
	MediaRecordBatch = "application/vnd.kafka.record-batch"

	HeaderNextOffset    = "Capgate-Next-Offset"
	HeaderHighWatermark = "Capgate-High-Watermark"
)
