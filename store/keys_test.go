package store

import (
	"bytes"
	"cmp"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestPrefixesAreDistinct(t *testing.T) {
	for a := range keyShapes {
		for b := range keyShapes {
			if a != b && strings.HasPrefix(b, a) {
				t.Errorf("prefix %q is a prefix of %q", a, b)
			}
		}
	}
}

func TestLogKeysAreDistinct(t *testing.T) {
	for _, key := range []string{keyLogCommit, keyLogLeader} {
		for prefix := range keyShapes {
			if strings.HasPrefix(key, prefix) || strings.HasPrefix(prefix, key) {
				t.Errorf("log key %q and store prefix %q overlap", key, prefix)
			}
		}
		if _, err := parseKey([]byte(key)); err == nil {
			t.Errorf("log key %q parses as a store key", key)
		}
	}
}

// Keys must sort like (group, topic, partition) compared field by field,
// whatever bytes the names hold.
func TestPartitionKeysSortLikeTuples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0x00, 0x01, 'a', 'b', '/', 0xFF}
	name := func() string {
		b := make([]byte, rng.IntN(4))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	type tuple struct {
		group, topic string
		partition    int32
	}
	for range 5000 {
		x := tuple{name(), name(), rng.Int32N(300)}
		y := tuple{name(), name(), rng.Int32N(300)}
		want := cmp.Or(cmp.Compare(x.group, y.group), cmp.Compare(x.topic, y.topic), cmp.Compare(x.partition, y.partition))
		kx, ky := partitionKey(prefixEpoch, x.group, x.topic, x.partition), partitionKey(prefixEpoch, y.group, y.topic, y.partition)
		if got := bytes.Compare(kx, ky); got != want {
			t.Fatalf("compare(%q, %q) = %d, tuples compare %d", kx, ky, got, want)
		}
		parsed, err := parseKey(kx)
		if err != nil {
			t.Fatalf("parse %q: %v", kx, err)
		}
		if got := (tuple{parsed.parts[0], parsed.parts[1], parsed.partition}); got != x {
			t.Fatalf("round trip %+v gave %+v", x, got)
		}
	}
}

func TestGroupPrefixDoesNotMatchLongerGroup(t *testing.T) {
	prefix := stringsKey(prefixOffset, "g1")
	if bytes.HasPrefix(partitionKey(prefixOffset, "g10", "t", 0), prefix) {
		t.Fatal("g1's prefix matches a key of g10")
	}
	if !bytes.HasPrefix(partitionKey(prefixOffset, "g1", "t", 0), prefix) {
		t.Fatal("g1's prefix does not match its own key")
	}
}

func TestParseKeyRefusesMalformed(t *testing.T) {
	for name, key := range map[string][]byte{
		"unknown prefix":      []byte("zz/x"),
		"unterminated":        []byte("d/abc"),
		"bad escape":          append([]byte("d/a"), 0x00, 0x07),
		"trailing":            append(stringsKey(prefixDenied, "a"), 'x'),
		"short partition":     append(stringsKey(prefixEpoch, "g", "t"), 0, 1),
		"negative partition":  append(stringsKey(prefixEpoch, "g", "t"), 0x80, 0, 0, 0),
		"missing second part": stringsKey(prefixMember, "g"),
	} {
		if _, err := parseKey(key); err == nil {
			t.Errorf("%s: parse %q succeeded", name, key)
		}
	}
}

func TestKeyName(t *testing.T) {
	for key, want := range map[string]string{
		string(partitionKey(prefixEpoch, "orders", "pay", 3)): "e/orders/pay/3",
		string(stringsKey(prefixMember, "g", "a/b")):          `m/g/"a/b"`,
		string(stringsKey(prefixDenied, "x\x00y")):            `d/"x\x00y"`,
		prefixKeyRing: "keyring",
		"zz":          `"zz"`,
	} {
		if got := keyName([]byte(key)); got != want {
			t.Errorf("keyName(%q) = %s, want %s", key, got, want)
		}
	}
}

// Every prefix of a valid value, and every value with a byte flipped in
// the version, must fail to decode without panicking.
func TestDecodersRefuseTruncatedValues(t *testing.T) {
	values := map[string][]byte{
		"state":  encodeState(PartitionState{State: StateRevoking, Owner: "a", Target: "b", Epoch: 9, ExpiresAtMs: 1, RevokedAtMs: 2}),
		"offset": encodeOffset(CommittedOffset{Offset: 5, Metadata: "m", Epoch: 3}),
		"member": encodeMember(Member{ID: "m", Topics: []string{"a", "b"}, SessionTimeoutMs: 10, Credential: Credential{ID: "j", Issuer: "i", Subject: "s"}}),
		"tenant": encodeMember(Member{ID: "m", Credential: Credential{ID: "j", Issuer: "i", Subject: "oauth:c", Tenant: "oauth:c"}}),
		"lease":  encodeLease(Lease{Holder: "h", ExpiresAtMs: 4}),
		"config": encodeGroupConfig(GroupConfig{Assignor: "sticky", Config: []byte(`{}`)}),
		"qos":    encodeQoS([]byte(`{"a":1}`), 7),
		"uint":   encodeUint(300),
	}
	decoders := map[string]func([]byte) error{
		"state":  func(v []byte) error { _, err := decodeState(v); return err },
		"offset": func(v []byte) error { _, err := decodeOffset(v); return err },
		"member": func(v []byte) error { _, err := decodeMember(v); return err },
		"tenant": func(v []byte) error { _, err := decodeMember(v); return err },
		"lease":  func(v []byte) error { _, err := decodeLease(v); return err },
		"config": func(v []byte) error { _, err := decodeGroupConfig(v); return err },
		"qos":    func(v []byte) error { _, _, err := decodeQoS(v); return err },
		"uint":   func(v []byte) error { _, err := decodeUint(v); return err },
	}
	for name, value := range values {
		decode := decoders[name]
		if err := decode(value); err != nil {
			t.Fatalf("%s: valid value refused: %v", name, err)
		}
		for n := range len(value) {
			if err := decode(value[:n]); err == nil {
				t.Errorf("%s: %d of %d bytes decoded", name, n, len(value))
			}
		}
		if err := decode(append(bytes.Clone(value), 0)); err == nil {
			t.Errorf("%s: trailing byte accepted", name)
		}
		other := bytes.Clone(value)
		other[0] = 0xff // no format has this byte
		if err := decode(other); err == nil {
			t.Errorf("%s: unknown format version accepted", name)
		}
	}
}

// A member written before members were bound to credentials (format 1,
// no credential fields) still decodes, with an empty credential; the
// coordinator then refuses any rejoin of it by member id.
func TestMemberWithoutCredentialDecodes(t *testing.T) {
	legacy := newEncoder(16)
	legacy.string("m")
	legacy.string("svc-1")
	legacy.string("svc")
	legacy.uint(1)
	legacy.string("orders")
	legacy.string("")
	legacy.string("sticky")
	legacy.int(10)
	m, err := decodeMember(legacy.b)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "m" || m.SessionTimeoutMs != 10 || m.Credential != (Credential{}) {
		t.Fatalf("legacy member decoded as %+v", m)
	}
	bound := Member{ID: "m", Credential: Credential{ID: "jti", Issuer: "iss", Subject: "sub"}}
	if got, err := decodeMember(encodeMember(bound)); err != nil || got.Credential != bound.Credential {
		t.Fatalf("bound member round trip: %+v, %v", got, err)
	}
	bound.Credential.Tenant = "oauth:c"
	if got, err := decodeMember(encodeMember(bound)); err != nil || got.Credential != bound.Credential {
		t.Fatalf("member with a tenant round trip: %+v, %v", got, err)
	}
}
