package kafkaproto

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"

	"github.com/capgate/capgate/ocap"
)

// clientIDMax is the longest client_id a join sends the coordinator: a
// name's bound (ocap.ValidName).
const clientIDMax = 255

// capgateClientID maps a Kafka client.id onto the client_id of a capgate
// join. Kafka puts no rule on client.id — "my app", "billing/eu-1",
// "Zürich" and 300 characters are all fine to it — while a capgate
// client_id must be a name (1-255 printable ASCII characters without '/',
// not . or ..; the coordinator answers anything else 400, which a Kafka
// client got as INVALID_REQUEST and could never join). So every character
// outside printable ASCII, every space and every '/' becomes '_', the
// result is cut to clientIDMax characters, and "." and ".." become "_"
// and "__": "my app/eu-1" joins as "my_app_eu-1", recognisable in admin
// views and as its members' id prefix. An empty client.id stays empty
// (the coordinator then names the member "member-…"). Only the join's
// client_id changes, made of the request's client.id as sent: the
// connection's client key keeps the client.id as keptClientID makes it
// (as sent, up to clientIDMax bytes).
func capgateClientID(kafkaID string) string {
	if kafkaID == "" || ocap.ValidName(kafkaID) {
		return kafkaID // no allocation for the ids clients usually send
	}
	var b strings.Builder
	b.Grow(min(len(kafkaID), clientIDMax))
	for _, r := range kafkaID { // invalid UTF-8: each bad byte one '_'
		if b.Len() == clientIDMax {
			break
		}
		if r <= ' ' || r > '~' || r == '/' {
			r = '_'
		}
		b.WriteRune(r)
	}
	switch s := b.String(); s {
	case ".", "..":
		return strings.Repeat("_", len(s))
	default:
		return s
	}
}

// keptClientIDPrefix is how much of a longer client.id the listener
// keeps readable (keptClientID).
const keptClientIDPrefix = 224

// keptClientIDMax is the longest client.id as kept: the prefix, "…#" and
// 43 characters of hash, 271 bytes.
const keptClientIDMax = keptClientIDPrefix + len("…#") + 43

// keptClientID is a request's client.id as a connection keeps it — in
// its client keys (clientKey, holderKey: what a fetch finds its member
// by, what every member of this gateway is listed under), its log lines
// and the group descriptions it answers: as sent up to clientIDMax
// bytes (what clients send: kgo's and librdkafka's defaults, Java's
// "consumer-<group>-<n>"), else its first keptClientIDPrefix bytes,
// "…#" and the unpadded base64url SHA-256 of the whole id — 271 bytes,
// a new string (nothing of the request's stays reachable). Kafka allows
// 32,767 bytes, and the keys kept each as sent: 2,500 members of one
// tenant (kafka_max_members_per_tenant) held ~80 MB of client.ids,
// 10,000 (kafka_max_members) ~320 MB (redteam19's recommendation 3).
// Two ids are one key only when they are equal: a kept long id is
// longer than clientIDMax, so it is never a short id sent as is, and two
// long ids sharing their first 224 bytes differ in their hashes.
func keptClientID(id string) string {
	if len(id) <= clientIDMax {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return id[:keptClientIDPrefix] + "…#" + base64.RawURLEncoding.EncodeToString(sum[:])
}
