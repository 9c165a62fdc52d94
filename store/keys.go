package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// The key layout: the one place that lists every key the store writes.
//
// A key is an ASCII prefix followed by its parts. A string part is its bytes
// with 0x00 escaped as 0x00 0xFF, then the terminator 0x00 0x01; this keeps
// byte order equal to string order, makes every key unambiguous whatever
// the names contain, and means the key of group "g1" is never a prefix of
// group "g10". A partition part is 4 bytes big-endian (partitions are
// >= 0, so byte order is numeric order). Keys therefore sort by group,
// then topic, then partition number, and a prefix scan over
// prefix+group returns one group's records in order.
//
// No prefix is a prefix of another (TestPrefixesAreDistinct).
//
//	prefix     key parts                  value (after the format byte)     scope
//	"layout"   -                          uvarint layout version            global
//	"e/"       group, topic, partition    uvarint epoch                     group
//	"s/"       group, topic, partition    PartitionState                    group
//	"o/"       group, topic, partition    CommittedOffset                   group
//	"l/"       group, topic, partition    Lease                             group
//	"c/"       group                      GroupConfig                       group
//	"m/"       group, member id           Member                            group
//	"d/"       jti                        varint exp (unix s)               global
//	"rm/"      group, member id           varint until (unix s)             global
//	"q/"       override id                bytes JSON, varint until (unix s) global
//	"gw/"      gateway id                 varint first seen (unix ms)       global
//	"meta/"    name                       bytes                             global
//	"keyring"  -                          bytes (ocap key ring)             global
//
// Every value starts with one format byte (formatVersion = 1) so a later
// release can read old values and migrate them. Fields follow as uvarint,
// varint (zigzag), or string/bytes = uvarint length + bytes (codec.go):
//
//	PartitionState   string State, string Owner, string Target,
//	                 uvarint Epoch, varint ExpiresAtMs, varint RevokedAtMs
//	CommittedOffset  varint Offset, string Metadata, uvarint Epoch
//	Lease            string Holder, varint ExpiresAtMs
//	GroupConfig      string Assignor, bytes Config (JSON)
//	Member           string ID, string InstanceID, string ClientID,
//	                 uvarint topic count, string per topic, string TopicPattern,
//	                 string Assignor, varint SessionTimeoutMs
//	meta sync_seq    bytes holding one uvarint
//	meta epoch_floor bytes holding one uvarint
//	meta store.log_settings  bytes holding the shared settings (log backends)
//
// The "layout" key records the oldest key layout version a reader must
// know to read the store whole; Open refuses a store whose layout it does
// not know. Open writes layoutBase into a new store; a writer raises it
// (Writer.RaiseLayout) in the same transaction as the first record an
// older build would misread, so a store keeps working with older builds
// until then (rolling upgrades of replicas on one Kafka log):
//
//	1  the layout above
//	2  as 1, and the coordinator keeps some partitions' epoch and state
//	   in meta values of its own (its bulk blocks) instead of "e/" and
//	   "s/": a build reading layout 1 would restore such a partition at
//	   an older epoch and state
const (
	layoutBase    = 1
	layoutVersion = 2 // the newest this build reads

	prefixLayout        = "layout"
	prefixEpoch         = "e/"
	prefixState         = "s/"
	prefixOffset        = "o/"
	prefixLease         = "l/"
	prefixGroupConfig   = "c/"
	prefixMember        = "m/"
	prefixDenied        = "d/"
	prefixRevokedMember = "rm/"
	prefixQoS           = "q/"
	prefixGateway       = "gw/"
	prefixMeta          = "meta/"
	prefixKeyRing       = "keyring"
)

// checkLayoutValue refuses a stored layout version this build cannot read.
func checkLayoutValue(value []byte) error {
	version, err := decodeUint(value)
	if err != nil {
		return fmt.Errorf("store: open: key %s: %w: %w", prefixLayout, ErrCorrupt, err)
	}
	if version < layoutBase || version > layoutVersion {
		return fmt.Errorf("store: open: key layout version %d, this build reads %d to %d", version, layoutBase, layoutVersion)
	}
	return nil
}

// Meta names with a meaning to the store itself.
const (
	// MetaSyncSeq holds the sync sequence; write it only with SaveSeq.
	MetaSyncSeq = "sync_seq"
	// MetaEpochFloor holds the highest epoch of every partition forgotten
	// so far (ForgetPartition); a partition without a stored epoch takes
	// only epochs above it. Written only by ForgetPartition.
	MetaEpochFloor = "epoch_floor"
	// MetaCoordinatorIncarnation is free for the coordinator's restart
	// counter (written with PutMeta, encoding up to the caller).
	MetaCoordinatorIncarnation = "coordinator_incarnation"
	// MetaLogSettings holds, on the log backends only, the shared
	// settings the log was written under (log_settings.go): bytes holding
	// uvarint count, then string name, string value per setting in name
	// order. Written by a log's new leader when the log lacks one of its
	// own (never with PutMeta); never in a Load. A meta value so that a
	// build that predates it loads it as an unknown meta name (ignored)
	// instead of refusing the log.
	MetaLogSettings = "store.log_settings"
)

// Keys that exist only on the log backends (the Kafka topic and its
// in-memory twin), never in badger nor in a Snapshot. No store prefix is a
// prefix of one and none is a prefix of a store key (TestLogKeysAreDistinct).
//
//	key           value (after the format byte)
//	"log/commit"  the last record of every transaction (commitRecord):
//	              string writer id, bytes nonce (16 random bytes per
//	              writer incarnation), uvarint seq (0 = the writer's
//	              opening barrier, then one per Update)
//	"log/leader"  a leader's beat (LogStore.Beat), alone in its
//	              transaction: string writer id, string advertised URL,
//	              varint unix ms when written (informational); never in
//	              a Snapshot nor in a snapshot of the log
//
// On the log a record's key is the store key above and its value the
// stored value; a delete is a tombstone (null value), so a compacted topic
// keeps exactly one record per live key. The key ring's value is sealed
// with the key-encryption key first (kek.go).
const (
	keyLogCommit = "log/commit"
	keyLogLeader = "log/leader"
)

// keyShape says which parts follow a prefix.
type keyShape struct {
	strings   int  // number of string parts
	partition bool // a partition part follows the strings
}

var keyShapes = map[string]keyShape{
	prefixLayout:        {},
	prefixEpoch:         {strings: 2, partition: true},
	prefixState:         {strings: 2, partition: true},
	prefixOffset:        {strings: 2, partition: true},
	prefixLease:         {strings: 2, partition: true},
	prefixGroupConfig:   {strings: 1},
	prefixMember:        {strings: 2},
	prefixDenied:        {strings: 1},
	prefixRevokedMember: {strings: 2},
	prefixQoS:           {strings: 1},
	prefixGateway:       {strings: 1},
	prefixMeta:          {strings: 1},
	prefixKeyRing:       {},
}

const (
	keyEscape     = 0x00
	keyEscapedNul = 0xFF
	keyTerminator = 0x01
)

// appendKeyString appends one escaped, terminated string part.
func appendKeyString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == keyEscape {
			b = append(b, keyEscape, keyEscapedNul)
			continue
		}
		b = append(b, s[i])
	}
	return append(b, keyEscape, keyTerminator)
}

// stringsKey builds prefix + string parts.
func stringsKey(prefix string, parts ...string) []byte {
	n := len(prefix)
	for _, p := range parts {
		n += len(p) + 2
	}
	b := make([]byte, 0, n)
	b = append(b, prefix...)
	for _, p := range parts {
		b = appendKeyString(b, p)
	}
	return b
}

// partitionKey builds prefix + group + topic + partition.
func partitionKey(prefix, group, topic string, partition int32) []byte {
	b := make([]byte, 0, len(prefix)+len(group)+len(topic)+8)
	b = append(b, prefix...)
	b = appendKeyString(b, group)
	b = appendKeyString(b, topic)
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

// parsedKey is a decoded key.
type parsedKey struct {
	prefix    string
	parts     []string
	partition int32
}

// keyPrefix returns the registered prefix key starts with, or "".
func keyPrefix(key []byte) string {
	for prefix := range keyShapes {
		if bytes.HasPrefix(key, []byte(prefix)) {
			return prefix
		}
	}
	return ""
}

// parseKey decodes a key according to its prefix's shape.
func parseKey(key []byte) (parsedKey, error) {
	prefix := keyPrefix(key)
	shape, ok := keyShapes[prefix]
	if !ok {
		return parsedKey{}, fmt.Errorf("unknown key prefix")
	}
	parsed := parsedKey{prefix: prefix, parts: make([]string, 0, shape.strings)}
	rest := key[len(prefix):]
	for range shape.strings {
		var s string
		var err error
		s, rest, err = readKeyString(rest)
		if err != nil {
			return parsedKey{}, err
		}
		parsed.parts = append(parsed.parts, s)
	}
	if shape.partition {
		if len(rest) != 4 || binary.BigEndian.Uint32(rest) > math.MaxInt32 {
			return parsedKey{}, fmt.Errorf("bad partition part")
		}
		parsed.partition = int32(binary.BigEndian.Uint32(rest))
		rest = nil
	}
	if len(rest) != 0 {
		return parsedKey{}, fmt.Errorf("%d trailing bytes", len(rest))
	}
	return parsed, nil
}

// readKeyString decodes one string part and returns the rest of the key.
func readKeyString(b []byte) (string, []byte, error) {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != keyEscape {
			out = append(out, b[i])
			continue
		}
		if i+1 >= len(b) {
			return "", nil, fmt.Errorf("unterminated string part")
		}
		switch b[i+1] {
		case keyTerminator:
			return string(out), b[i+2:], nil
		case keyEscapedNul:
			out = append(out, keyEscape)
			i++
		default:
			return "", nil, fmt.Errorf("bad escape in string part")
		}
	}
	return "", nil, fmt.Errorf("unterminated string part")
}

// keyName renders a key for error messages: "e/orders/payments/3".
// Parts that are empty or hold '/' or unprintable bytes are quoted; a key
// that does not parse is shown quoted whole.
func keyName(key []byte) string {
	parsed, err := parseKey(key)
	if err != nil {
		return strconv.Quote(string(key))
	}
	var b strings.Builder
	b.WriteString(parsed.prefix)
	for i, part := range parsed.parts {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(displayPart(part))
	}
	if keyShapes[parsed.prefix].partition {
		b.WriteByte('/')
		b.WriteString(strconv.Itoa(int(parsed.partition)))
	}
	return b.String()
}

func displayPart(s string) string {
	if s == "" || strings.ContainsRune(s, '/') {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || r == unicode.ReplacementChar {
			return strconv.Quote(s)
		}
	}
	return s
}

// partitionName renders "group/topic/partition" for write errors.
func partitionName(group, topic string, partition int32) string {
	return displayPart(group) + "/" + displayPart(topic) + "/" + strconv.Itoa(int(partition))
}
