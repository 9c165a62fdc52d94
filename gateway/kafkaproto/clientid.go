package kafkaproto

import (
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
// client_id changes: the connection's client key keeps the client.id as
// the client sent it.
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
