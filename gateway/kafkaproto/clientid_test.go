package kafkaproto

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/ocap"
)

// TestCapgateClientID: every client.id Kafka allows becomes a capgate
// client_id the coordinator takes (a name, or empty), recognisably; a
// valid one is unchanged.
func TestCapgateClientID(t *testing.T) {
	long := strings.Repeat("a", 300)
	for in, want := range map[string]string{
		"":                                "",
		"okapp":                           "okapp",
		"my app":                          "my_app",
		"billing/eu-1":                    "billing_eu-1",
		"Zürich-7":                        "Z_rich-7",
		"tab\there\x00nul\n":              "tab_here_nul_",
		"\xff\xfebad":                     "__bad",
		".":                               "_",
		"..":                              "__",
		"...":                             "...",
		long:                              long[:255],
		strings.Repeat("é", 300):          strings.Repeat("_", 255),
		strings.Repeat("c", 255):          strings.Repeat("c", 255),
		"rdkafka " + long:                 "rdkafka_" + long[:247],
		"kgo/" + strings.Repeat("x", 251): "kgo_" + strings.Repeat("x", 251),
	} {
		got := capgateClientID(in)
		if got != want {
			t.Errorf("capgateClientID(%.40q) = %.40q (%d), want %.40q (%d)", in, got, len(got), want, len(want))
		}
		if got != "" && !ocap.ValidName(got) {
			t.Errorf("capgateClientID(%.40q) = %.40q is not a name", in, got)
		}
	}
}
