package kafkaclients

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestKcatConsumeOnlyProduceIsRefusedAtProduce pins newuser's "Topic demo
// partition count changed from 12 to 0" to where it comes from. Kafka's
// authorization model: a principal that may read a topic may describe
// it, so Metadata shows it every partition, and a write is refused at
// Produce with TOPIC_AUTHORIZATION_FAILED. Through the listener a
// consume-only credential's kcat -L lists the topic's 4 partitions with
// their leaders and no error; kcat -P gets the same 4 partitions from
// Metadata, is refused at Produce ("Topic authorization failed"), and
// only then does librdkafka log "partition count changed from 4 to 0":
// it marks the topic failed on the Produce's error (rd_kafka_topic_set_error),
// as against Kafka with a read-only ACL — no Metadata answer ever had 0
// partitions.
func TestKcatConsumeOnlyProduceIsRefusedAtProduce(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	cred := mintCredential(t, s, "readonly", []string{s.Topic}, nil)

	out, err := kcat(t, s, cred.Credential, "", "-L", "-t", s.Topic)
	if err != nil {
		t.Fatalf("kcat -L: %v\n%s", err, out)
	}
	if !strings.Contains(out, fmt.Sprintf("topic %q with 4 partitions", s.Topic)) || strings.Contains(out, "Err") {
		t.Fatalf("a consume-only credential's metadata of %s, want its 4 partitions and no error:\n%s", s.Topic, out)
	}
	if n := len(regexp.MustCompile(`partition \d+, leader \d+`).FindAllString(out, -1)); n != 4 {
		t.Fatalf("%d partitions with a leader, want 4:\n%s", n, out)
	}

	out, err = kcat(t, s, cred.Credential, "x\n", "-t", s.Topic, "-p", "2", "-P", "-d", "metadata,topic,msg")
	if err == nil || !strings.Contains(out, "Delivery failed for message: Broker: Topic authorization failed") {
		t.Fatalf("kcat -P with a consume-only credential: %v, want Topic authorization failed:\n%s", err, tail(out))
	}
	got := regexp.MustCompile(`partition count changed from (\d+) to (\d+)|Topic #0/1: \S+ with (\d+) partitions|encountered error: Broker: Topic authorization failed`).FindAllStringSubmatch(out, -1)
	var seen []string
	refused := false
	for _, m := range got {
		seen = append(seen, m[0])
		switch {
		case m[3] != "" && m[3] != "4":
			t.Errorf("a Metadata answer showed %s partitions, want 4", m[3])
		case strings.HasPrefix(m[0], "encountered"):
			refused = true
		case m[2] == "0" && !refused:
			t.Errorf("the partition count fell to 0 before the Produce was refused: %q", seen)
		}
	}
	if !refused {
		t.Errorf("no Produce refused in kcat's debug: %q", seen)
	}
}

// tail is the last lines of a long output.
func tail(out string) string {
	lines := strings.Split(out, "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}
