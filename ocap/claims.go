package ocap

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is a token kind, carried in the JOSE header typ.
type Kind string

// The token kinds. A verifier is always told which kind it expects.
const (
	KindCapability Kind = "capgate+jwt"
	KindClient     Kind = "capgate-client+jwt"
	KindMember     Kind = "capgate-member+jwt"
)

// Valid reports whether k is one of capgate's token kinds.
func (k Kind) Valid() bool {
	return k == KindCapability || k == KindClient || k == KindMember
}

// ClaimedKind is the kind token's JOSE header claims, unverified: only
// for telling a caller which token it sent where another was wanted
// ("a client credential is not a capability"), never for deciding; ""
// when token is no capgate JWT.
func ClaimedKind(token []byte) Kind {
	head, _, found := bytes.Cut(token, []byte("."))
	if !found || len(head) > 512 {
		return ""
	}
	var h struct {
		Typ Kind `json:"typ"`
	}
	raw, err := base64.RawURLEncoding.DecodeString(string(head))
	if err != nil || json.Unmarshal(raw, &h) != nil || !h.Typ.Valid() {
		return ""
	}
	return h.Typ
}

// Op is one operation a token allows; Ops is a set of them. A capability
// allows fetch, commit and produce on its one partition; a client
// credential allows consume (join groups and read through them) and
// produce (write, through the Kafka listener, to the topics it names
// exactly). One vocabulary, one claim (op), the set each kind may carry
// checked by the verifier (checkShape).
type Op uint8

// The operations.
const (
	OpFetch Op = 1 << iota
	OpCommit
	OpProduce
	OpConsume
)

// Ops is a set of Op, encoded in JSON as a list of names.
type Ops uint8

const (
	opsAll = Ops(OpFetch | OpCommit | OpProduce) // a capability's
	// ClientOpsAll is every op a client credential may carry.
	ClientOpsAll = Ops(OpConsume | OpProduce)
	// ClientOpsDefault is what a client credential allows when it has
	// no op claim: credentials minted before client ops existed, and
	// every consume-only one (Mint leaves the claim out for them, so
	// gateways that predate the claim still verify them).
	ClientOpsDefault = Ops(OpConsume)
)

var opNames = [...]struct {
	op   Op
	name string
}{{OpFetch, "fetch"}, {OpCommit, "commit"}, {OpConsume, "consume"}, {OpProduce, "produce"}}

// Has reports whether op is in the set.
func (o Ops) Has(op Op) bool { return Ops(op)&o != 0 }

// SubsetOf reports whether every op of o is in p.
func (o Ops) SubsetOf(p Ops) bool { return o&^p == 0 }

// ParseOps parses a capability's op names ("fetch", "commit",
// "produce"); any other name is ErrUnknownOp.
func ParseOps(names []string) (Ops, error) {
	return parseOpsWithin(names, opsAll, "a capability's ops: fetch, commit, produce")
}

// ParseClientOps parses a client credential's op names ("consume",
// "produce"); any other name is ErrUnknownOp. An empty list is the
// default, consume alone.
func ParseClientOps(names []string) (Ops, error) {
	if len(names) == 0 {
		return ClientOpsDefault, nil
	}
	return parseOpsWithin(names, ClientOpsAll, "a client credential's ops: consume, produce")
}

func parseOpsWithin(names []string, within Ops, known string) (Ops, error) {
	var o Ops
	for _, n := range names {
		op, ok := parseOp(n)
		if !ok || !Ops(op).SubsetOf(within) {
			return 0, fmt.Errorf("%w: %.40q (%s)", ErrUnknownOp, n, known)
		}
		o |= Ops(op)
	}
	return o, nil
}

func parseOp(name string) (Op, bool) {
	for _, e := range opNames {
		if e.name == name {
			return e.op, true
		}
	}
	return 0, false
}

// Names lists the ops in canonical order.
func (o Ops) Names() []string {
	var out []string
	for _, e := range opNames {
		if o.Has(e.op) {
			out = append(out, e.name)
		}
	}
	return out
}

func (o Ops) String() string { return strings.Join(o.Names(), ",") }

// MarshalJSON encodes the set as a list of names.
func (o Ops) MarshalJSON() ([]byte, error) { return json.Marshal(o.Names()) }

// UnmarshalJSON refuses unknown names with ErrUnknownOp. Which of the
// known ops a token may carry depends on its kind (checkShape).
func (o *Ops) UnmarshalJSON(b []byte) error {
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return fmt.Errorf("%w: claim op: want a list of op names (fetch, commit, consume, produce)", ErrBadClaims)
	}
	ops, err := parseOpsWithin(names, opsAll|ClientOpsAll, "fetch, commit, consume, produce")
	if err != nil {
		return err
	}
	*o = ops
	return nil
}

// OffsetRange is the half-open range [From, To) of offsets a capability
// may read. To == 0 means unbounded above. JSON: [from, to].
type OffsetRange struct {
	From, To int64
}

// Contains reports whether offset lies in the range.
func (r OffsetRange) Contains(offset int64) bool {
	return offset >= r.From && (r.To == 0 || offset < r.To)
}

// Within reports whether r is a sub-range of s.
func (r OffsetRange) Within(s OffsetRange) bool {
	if r.From < s.From {
		return false
	}
	if s.To == 0 {
		return true
	}
	return r.To != 0 && r.To <= s.To
}

func (r OffsetRange) valid() bool {
	return r.From >= 0 && (r.To == 0 || r.To > r.From)
}

// MarshalJSON encodes [from, to].
func (r OffsetRange) MarshalJSON() ([]byte, error) {
	return []byte("[" + strconv.FormatInt(r.From, 10) + "," + strconv.FormatInt(r.To, 10) + "]"), nil
}

// UnmarshalJSON accepts exactly two integers.
func (r *OffsetRange) UnmarshalJSON(b []byte) error {
	var v [2]json.Number
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw []json.Number
	if err := dec.Decode(&raw); err != nil || len(raw) != 2 {
		return fmt.Errorf("%w: off must be [from, to]", ErrBadOffsetRange)
	}
	copy(v[:], raw)
	from, err1 := strconv.ParseInt(v[0].String(), 10, 64)
	to, err2 := strconv.ParseInt(v[1].String(), 10, 64)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("%w: off must hold integers", ErrBadOffsetRange)
	}
	*r = OffsetRange{From: from, To: to}
	if !r.valid() {
		return fmt.Errorf("%w: [%d, %d)", ErrBadOffsetRange, from, to)
	}
	return nil
}

// QoS carries per-capability service settings.
type QoS struct {
	LogLevel       string `json:"lvl,omitempty"` // "debug" turns on debug lines for this capability
	Monitor        string `json:"mon,omitempty"` // metrics label (bounded by the gateway)
	MaxBytesPerSec int64  `json:"bps,omitempty"` // 0 means unlimited
}

// Seconds is a JWT NumericDate restricted to an integer number of seconds
// in [0, 2^40): "1e300", 1.5 and "123" are refused with ErrBadTime.
type Seconds int64

const maxSeconds = 1 << 40

// UnmarshalJSON accepts only a plain non-negative integer literal.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 0 || n >= maxSeconds {
		return fmt.Errorf("%w: %.40s", ErrBadTime, b)
	}
	*s = Seconds(n)
	return nil
}

// Claims of every token kind. Which fields are required depends on the
// kind (see Verifier). Field names follow DESIGN §3.
type Claims struct {
	Issuer    string  `json:"iss"`
	Audience  string  `json:"aud"`
	Subject   string  `json:"sub"`
	ID        string  `json:"jti"`
	IssuedAt  Seconds `json:"iat"`
	NotBefore Seconds `json:"nbf,omitempty"`
	ExpiresAt Seconds `json:"exp"`

	// Capabilities.
	Group     string       `json:"grp,omitempty"`
	Topic     string       `json:"tp,omitempty"`
	Partition *int32       `json:"pt,omitempty"`
	Epoch     uint64       `json:"ep,omitempty"`
	Ops       Ops          `json:"op,omitempty"`
	Offsets   *OffsetRange `json:"off,omitempty"`
	QoS       *QoS         `json:"qos,omitempty"`
	Chain     []string     `json:"chn,omitempty"`
	// Tenant (capabilities a join or heartbeat granted) is who the
	// member the capability was granted to counts for: an OAuth client
	// ("oauth:<client_id>"), an IdP identity's id, else the client
	// credential's jti — an identity its holder cannot multiply by
	// joining more groups. Gateways bound its fetches in flight with it.
	// Attenuated children keep it.
	Tenant  string          `json:"tnt,omitempty"`
	Caveats json.RawMessage `json:"cav,omitempty"`

	// Client credentials: the groups and topics the client may join for.
	// An entry "*" allows any. Its ops (op) are ClientOps.
	Groups []string `json:"grps,omitempty"`
	Topics []string `json:"tps,omitempty"`

	// Derived at verification, not encoded.
	kind Kind
	kid  string
}

// Kind is the token kind the claims were verified as.
func (c *Claims) Kind() Kind { return c.kind }

// KeyID is the kid of the key that signed the token.
func (c *Claims) KeyID() string { return c.kid }

// PartitionNumber returns pt, or -1 when absent.
func (c *Claims) PartitionNumber() int32 {
	if c.Partition == nil {
		return -1
	}
	return *c.Partition
}

// Root is the jti at the root of the capability's attenuation chain:
// chn[0], or its own jti when it was minted directly. Budgets (byte
// rates, attenuations) count against the root, so attenuating never
// multiplies them.
func (c *Claims) Root() string {
	if len(c.Chain) > 0 {
		return c.Chain[0]
	}
	return c.ID
}

// AllowsOffset reports whether the offset caveat (if any) admits offset.
func (c *Claims) AllowsOffset(offset int64) bool {
	return c.Offsets == nil || c.Offsets.Contains(offset)
}

// ClientOps is what a client credential allows: its op claim, or
// ClientOpsDefault (consume alone) when it has none — a credential minted
// before client ops existed, a consume-only one, or an IdP identity's
// (its rules grant groups and topics, never produce).
func (c *Claims) ClientOps() Ops {
	if c.Ops == 0 {
		return ClientOpsDefault
	}
	return c.Ops
}

// MayProduceTo reports whether a client credential may write to topic:
// it carries the produce op and its tps claim names topic itself. A
// pattern ("*", "orders-*") grants consume only: one list serves both
// ops, and a subscription pattern must not turn into write access to
// every topic created under it later.
func (c *Claims) MayProduceTo(topic string) bool {
	return c.ClientOps().Has(OpProduce) && slices.Contains(c.Topics, topic)
}

// ProducesAnywhere reports whether a client credential may write to
// some topic: the produce op and at least one exact topic name.
func (c *Claims) ProducesAnywhere() bool {
	return c.ClientOps().Has(OpProduce) && slices.ContainsFunc(c.Topics, IsExactName)
}

// IsExactName reports whether a grps/tps entry is a name, not a pattern.
func IsExactName(entry string) bool { return !strings.HasSuffix(entry, "*") }

// AllowsGroup reports whether a client credential may join group.
func (c *Claims) AllowsGroup(group string) bool { return listAllows(c.Groups, group) }

// KafkaInternalTopic reports whether topic is one of Kafka's own
// (__consumer_offsets, __transaction_state, __cluster_metadata: Kafka
// names them with a leading "__"). No pattern of a credential covers them
// and no client is granted them.
func KafkaInternalTopic(topic string) bool { return strings.HasPrefix(topic, "__") }

// AllowsTopic reports whether a client credential may subscribe to topic.
func (c *Claims) AllowsTopic(topic string) bool { return listAllows(c.Topics, topic) }

// listAllows: an entry "*" allows any value, "p*" any value starting
// with p (prefix patterns: "orders-*"), any other entry itself.
func listAllows(list []string, v string) bool {
	for _, e := range list {
		if PatternMatches(e, v) {
			return true
		}
	}
	return false
}

// PatternMatches reports whether a grps/tps entry allows v: "*" anything,
// "p*" what starts with p, otherwise v itself.
func PatternMatches(pattern, v string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(v, prefix)
	}
	return pattern == v
}

// ValidPattern reports whether s is a legal grps/tps entry: "*", a name
// valid accepts, or such a name's prefix followed by one "*" at the end
// ("orders-*": every name starting with "orders-", as Kafka's prefixed
// ACLs). A "*" anywhere else is not a pattern and not a name.
func ValidPattern(s string, valid func(string) bool) bool {
	if s == "*" {
		return true
	}
	prefix, _ := strings.CutSuffix(s, "*")
	return !strings.Contains(prefix, "*") && valid(prefix)
}

// PatternsCover reports whether list allows everything pattern allows: a
// prefix pattern "x*" needs an entry "p*" with p a prefix of x; a plain
// value needs an entry that matches it.
func PatternsCover(list []string, pattern string) bool {
	if _, ok := strings.CutSuffix(pattern, "*"); !ok {
		return listAllows(list, pattern)
	}
	for _, e := range list {
		if prefix, ok := strings.CutSuffix(e, "*"); ok && strings.HasPrefix(pattern, prefix) {
			return true
		}
	}
	return false
}

func (s Seconds) time() time.Time { return time.Unix(int64(s), 0) }
