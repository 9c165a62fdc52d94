package store

import (
	"encoding/json"
	"fmt"
)

// Partition states (PartitionState.State).
const (
	StateUnowned  = "unowned"
	StateOwned    = "owned"
	StateRevoking = "revoking"
)

// PartitionState is the handoff state of one partition.
type PartitionState struct {
	State       string // StateUnowned, StateOwned or StateRevoking
	Owner       string // member holding the partition (owned, revoking from)
	Target      string // member it moves to (revoking; may be empty)
	Epoch       uint64 // epoch of the owner's capability
	ExpiresAtMs int64  // owner's capability expiry, unix ms
	RevokedAtMs int64  // when the revocation started, unix ms (revoking)
}

// CommittedOffset is a committed offset of one partition.
type CommittedOffset struct {
	Offset   int64 // next offset to read, >= 0
	Metadata string
	Epoch    uint64 // partition epoch of the capability that committed it
}

// GroupConfig is one group's configuration, opaque to the store.
type GroupConfig struct {
	Assignor string
	Config   []byte // JSON (empty for defaults)
}

// Member is one group member as it joined.
type Member struct {
	ID               string
	InstanceID       string
	ClientID         string
	Topics           []string
	TopicPattern     string
	Assignor         string
	SessionTimeoutMs int64
	// Credential is what opened the member: the id a rejoin must present
	// again (and an admin denies to end it), and its issuer and subject.
	// Values written before it existed decode with it empty.
	Credential Credential
}

// Credential identifies the client credential (or IdP identity) a member
// is bound to.
type Credential struct {
	ID      string
	Issuer  string
	Subject string
	// Tenant is who the member counts for in the coordinator's
	// groups_per_credential bound when not ID (an OAuth client); values
	// written before it existed decode with it empty.
	Tenant string
}

// Lease pins a partition to a holder until ExpiresAtMs (unix ms).
type Lease struct {
	Holder      string
	ExpiresAtMs int64
}

// Denied is a denied capability id, kept until Exp (unix seconds).
type Denied struct {
	JTI string
	Exp int64
}

// RevokedMember revokes every capability of a member until Until (unix s).
type RevokedMember struct {
	Group    string
	MemberID string
	Until    int64
}

// QoSOverride is an operator override, opaque to the store, kept until
// Until (unix seconds).
type QoSOverride struct {
	ID     string
	Config []byte // JSON
	Until  int64
}

// Gateway is a gateway the coordinator has seen.
type Gateway struct {
	ID          string
	FirstSeenMs int64
}

// Value encodings, as tabled in keys.go.

func encodeUint(v uint64) []byte {
	e := newEncoder(10)
	e.uint(v)
	return e.b
}

func decodeUint(value []byte) (uint64, error) {
	d := newDecoder(value)
	v := d.uint()
	return v, d.finish()
}

func encodeInt(v int64) []byte {
	e := newEncoder(10)
	e.int(v)
	return e.b
}

func decodeInt(value []byte) (int64, error) {
	d := newDecoder(value)
	v := d.int()
	return v, d.finish()
}

func encodeBytes(p []byte) []byte {
	e := newEncoder(len(p) + 4)
	e.bytes(p)
	return e.b
}

func decodeBytes(value []byte) ([]byte, error) {
	d := newDecoder(value)
	p := d.bytes()
	return p, d.finish()
}

func encodeState(s PartitionState) []byte {
	e := newEncoder(len(s.State) + len(s.Owner) + len(s.Target) + 32)
	e.string(s.State)
	e.string(s.Owner)
	e.string(s.Target)
	e.uint(s.Epoch)
	e.int(s.ExpiresAtMs)
	e.int(s.RevokedAtMs)
	return e.b
}

func decodeState(value []byte) (PartitionState, error) {
	d := newDecoder(value)
	s := PartitionState{
		State:  d.string(),
		Owner:  d.string(),
		Target: d.string(),
		Epoch:  d.uint(),
	}
	s.ExpiresAtMs = d.int()
	s.RevokedAtMs = d.int()
	if err := d.finish(); err != nil {
		return PartitionState{}, err
	}
	return s, validateState(s)
}

func validateState(s PartitionState) error {
	switch s.State {
	case StateUnowned, StateOwned, StateRevoking:
		return nil
	}
	return fmt.Errorf("%w: unknown partition state %q", ErrInvalid, s.State)
}

func encodeOffset(o CommittedOffset) []byte {
	e := newEncoder(len(o.Metadata) + 24)
	e.int(o.Offset)
	e.string(o.Metadata)
	e.uint(o.Epoch)
	return e.b
}

func decodeOffset(value []byte) (CommittedOffset, error) {
	d := newDecoder(value)
	o := CommittedOffset{Offset: d.int(), Metadata: d.string(), Epoch: d.uint()}
	if err := d.finish(); err != nil {
		return CommittedOffset{}, err
	}
	return o, validateOffset(o)
}

func validateOffset(o CommittedOffset) error {
	if o.Offset < 0 {
		return fmt.Errorf("%w: negative offset %d", ErrInvalid, o.Offset)
	}
	return nil
}

func encodeGroupConfig(c GroupConfig) []byte {
	e := newEncoder(len(c.Assignor) + len(c.Config) + 8)
	e.string(c.Assignor)
	e.bytes(c.Config)
	return e.b
}

func decodeGroupConfig(value []byte) (GroupConfig, error) {
	d := newDecoder(value)
	c := GroupConfig{Assignor: d.string(), Config: d.bytes()}
	if err := d.finish(); err != nil {
		return GroupConfig{}, err
	}
	return c, validateJSON(c.Config)
}

func validateJSON(p []byte) error {
	if len(p) != 0 && !json.Valid(p) {
		return fmt.Errorf("%w: config is not valid JSON", ErrInvalid)
	}
	return nil
}

func encodeMember(m Member) []byte {
	e := newEncoder(64)
	e.string(m.ID)
	e.string(m.InstanceID)
	e.string(m.ClientID)
	e.uint(uint64(len(m.Topics)))
	for _, t := range m.Topics {
		e.string(t)
	}
	e.string(m.TopicPattern)
	e.string(m.Assignor)
	e.int(m.SessionTimeoutMs)
	e.string(m.Credential.ID)
	e.string(m.Credential.Issuer)
	e.string(m.Credential.Subject)
	e.b[0] = memberFormatCredential
	if m.Credential.Tenant != "" {
		e.string(m.Credential.Tenant)
		e.b[0] = memberFormatTenant
	}
	return e.b
}

// memberFormatCredential is the format byte of member values that carry
// the credential; members written before bindings existed carry
// formatVersion and decode with an empty Credential. memberFormatTenant
// values also carry Credential.Tenant (written only when it is set, so
// other members stay readable by a binary that predates it).
const (
	memberFormatCredential byte = formatVersion + 1
	memberFormatTenant     byte = formatVersion + 2
)

func decodeMember(value []byte) (Member, error) {
	format := byte(0)
	if len(value) > 0 {
		format = value[0]
	}
	bound := format == memberFormatCredential || format == memberFormatTenant
	if bound {
		value = append([]byte{formatVersion}, value[1:]...)
	}
	d := newDecoder(value)
	m := Member{ID: d.string(), InstanceID: d.string(), ClientID: d.string()}
	n := d.uint()
	if n > uint64(len(d.b)) { // every topic takes at least one byte
		return Member{}, fmt.Errorf("topic count %d exceeds value", n)
	}
	for range n {
		m.Topics = append(m.Topics, d.string())
	}
	m.TopicPattern = d.string()
	m.Assignor = d.string()
	m.SessionTimeoutMs = d.int()
	if bound {
		m.Credential = Credential{ID: d.string(), Issuer: d.string(), Subject: d.string()}
	}
	if format == memberFormatTenant {
		m.Credential.Tenant = d.string()
	}
	if err := d.finish(); err != nil {
		return Member{}, err
	}
	return m, nil
}

func encodeLease(l Lease) []byte {
	e := newEncoder(len(l.Holder) + 12)
	e.string(l.Holder)
	e.int(l.ExpiresAtMs)
	return e.b
}

func decodeLease(value []byte) (Lease, error) {
	d := newDecoder(value)
	l := Lease{Holder: d.string(), ExpiresAtMs: d.int()}
	return l, d.finish()
}

// encodeQoS stores the override's JSON and its expiry.
func encodeQoS(config []byte, until int64) []byte {
	e := newEncoder(len(config) + 16)
	e.bytes(config)
	e.int(until)
	return e.b
}

func decodeQoS(value []byte) (config []byte, until int64, err error) {
	d := newDecoder(value)
	config = d.bytes()
	until = d.int()
	if err := d.finish(); err != nil {
		return nil, 0, err
	}
	return config, until, validateJSON(config)
}
