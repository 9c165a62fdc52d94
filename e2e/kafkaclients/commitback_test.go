package kafkaclients

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// resetEvent is one line reset.js prints.
type resetEvent struct {
	Ev        string          `json:"ev"`
	OK        bool            `json:"ok"`
	Hung      bool            `json:"hung"`
	Type      string          `json:"type"`
	Err       string          `json:"err"`
	Namespace string          `json:"namespace"`
	Message   string          `json:"message"`
	Error     json.RawMessage `json:"error"`
}

// runKafkaJSReset runs testdata/kafkajs/reset.js for group (offset ""
// : admin.resetOffsets earliest; else admin.setOffsets to it) and
// returns what it printed.
func runKafkaJSReset(t testing.TB, s *Stack, token, group, offset string) []resetEvent {
	t.Helper()
	cmd := exec.Command("node", "reset.js")
	cmd.Dir = kafkajsDir(t)
	cmd.Env = append(os.Environ(), "BROKERS="+strings.Join(s.KafkaAddrs(), ","), "CAPGATE_TOKEN="+token,
		"GROUP="+group, "TOPIC="+s.Topic, "OFFSET="+offset, "TIMEOUT_MS=15000")
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("reset.js: %v\n%s", err, raw)
	}
	var out []resetEvent
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var e resetEvent
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
		t.Logf("reset.js: %s", sc.Text())
	}
	return out
}

// committedForward has a kgo member of group read offsetResetOld records
// of every partition, commit them and leave.
func committedForward(t testing.TB, s *Stack, group string) {
	t.Helper()
	for p := range s.Partitions {
		produceDirect(t, s, s.Topic, p, offsetResetOld)
	}
	cl := groupClient(t, s, group, group+"-reader", kgo.NewOffset().AtStart())
	pollUntil(t, s, cl, offsetResetOld)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if got := emptied(t, s, group); len(got) != int(s.Partitions) {
		t.Fatalf("committed %v, want every partition at %d", got, offsetResetOld)
	}
}

// policyLines are the gateway's log lines of commits refused by policy.
func policyLines(logs *observer.ObservedLogs) []observer.LoggedEntry {
	return logs.FilterMessageSnippet("kafka OffsetCommit").FilterMessageSnippet("refused").All()
}

// checkPolicyLine checks one refused-commit line: INFO, naming group,
// topic and partition, the refused offset (and the committed one, for a
// member's), the reset command to run, and nothing of the token.
func checkPolicyLine(t *testing.T, e observer.LoggedEntry, group, topic string, committed, refused int64, to, token string) {
	t.Helper()
	f := e.ContextMap()
	p, _ := f["partition"].(int32)
	want := fmt.Sprintf("capgate admin offsets reset %s %s %d --to %s", group, topic, p, to)
	switch {
	case e.Level != zap.InfoLevel:
		t.Errorf("level %v, want info: %s %v", e.Level, e.Message, f)
	case f["group"] != group || f["topic"] != topic || f["refused_offset"] != refused || f["instead"] != want:
		t.Errorf("line %q %v, want group %s topic %s refused_offset %d instead %q", e.Message, f, group, topic, refused, want)
	case committed >= 0 && f["committed"] != committed:
		t.Errorf("committed %v, want %d: %v", f["committed"], committed, f)
	case committed < 0 && f["committed"] != nil:
		t.Errorf("an admin commit's line names a committed offset: %v", f)
	}
	for k, v := range f {
		if s, ok := v.(string); ok && token != "" && strings.Contains(s, token[len(token)-20:]) {
			t.Errorf("field %s carries the token", k)
		}
	}
}

// unmoved checks group's committed offsets are still offsetResetOld.
func unmoved(t *testing.T, s *Stack, group string) {
	t.Helper()
	for _, p := range s.Describe(t, group).Partitions {
		if p.Committed == nil || *p.Committed != offsetResetOld {
			t.Errorf("partition %d committed %v, want %d (unmoved)", p.Partition, p.Committed, offsetResetOld)
		}
	}
}

// TestKafkaJSResetOffsetsBackwardIsRefusedByPolicy: KafkaJS's
// admin.resetOffsets({earliest: true}) through the listener — a member
// of its own committing -2, KafkaJS's earliest sentinel, on each
// partition of a group committed at 5 — is refused POLICY_VIOLATION
// ("Request parameters do not satisfy the configured policy": capgate
// never moves a committed offset back by a commit), once per partition,
// never retried, and the gateway logs at INFO, per partition, the group,
// the committed and the refused offset and the command that resets it
// (`capgate admin offsets reset js-reset orders P --to earliest`).
// Before: INVALID_COMMIT_OFFSET_SIZE ("The committing offset data size is
// not valid") and nothing in the gateway log. KafkaJS's resetOffsets
// itself resolves either way (its consumer crashes on the refusal and
// setOffsets resolves on the crash's stop): the gateway's line is what
// tells the operator.
func TestKafkaJSResetOffsetsBackwardIsRefusedByPolicy(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	s := Start(t, Options{Partitions: 3, Observe: core})
	committedForward(t, s, "js-reset")
	token := s.ClientCredential(t, "js-reset")
	refusals := 0
	for _, e := range runKafkaJSReset(t, s, token, "js-reset", "") {
		if e.Ev != "log" || !strings.Contains(e.Message, "OffsetCommit") {
			continue
		}
		refusals++
		if !strings.Contains(string(e.Error), "do not satisfy the configured policy") {
			t.Errorf("KafkaJS's commit error %s, want POLICY_VIOLATION's %q", e.Error, kerr.PolicyViolation.Description)
		}
	}
	if refusals == 0 || refusals > int(s.Partitions) {
		t.Errorf("KafkaJS logged %d refused OffsetCommits, want 1 to %d (one per partition, none retried)", refusals, s.Partitions)
	}
	lines := policyLines(logs)
	if len(lines) != refusals {
		t.Errorf("gateway logged %d refused commits, KafkaJS saw %d", len(lines), refusals)
	}
	for _, e := range lines {
		checkPolicyLine(t, e, "js-reset", s.Topic, offsetResetOld, -2, "earliest", token)
	}
	unmoved(t, s, "js-reset")
}

// TestKadmCommitOffsetsIsRefusedByPolicy: Kafka's admin commit (no
// member, generation -1) — kadm's CommitOffsets, as
// kafka-consumer-groups --reset-offsets sends it — moving an empty
// group's committed offsets back to 0 answers POLICY_VIOLATION on each
// partition (before: UNKNOWN_MEMBER_ID, which reads as a lost member),
// leaves them where they were, and the gateway logs at INFO per
// partition what to run instead (`capgate admin offsets reset G T P --to
// 0`). A topic the credential may not see still answers
// TOPIC_AUTHORIZATION_FAILED, as Kafka checks the topic first.
func TestKadmCommitOffsetsIsRefusedByPolicy(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	s := Start(t, Options{Partitions: 2, Observe: core})
	committedForward(t, s, "kadm-reset")
	token := s.ClientCredential(t, "kadm-reset")
	cl := kgoClient(t, s.KafkaAddrs(), token, true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var back kadm.Offsets
	for p := range s.Partitions {
		back.Add(kadm.Offset{Topic: s.Topic, Partition: p, At: 0, LeaderEpoch: -1})
	}
	resp, err := kadm.NewClient(cl).CommitOffsets(ctx, "kadm-reset", back)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp[s.Topic]) != int(s.Partitions) {
		t.Fatalf("answered %v", resp)
	}
	resp.Each(func(r kadm.OffsetResponse) {
		if r.Err != kerr.PolicyViolation {
			t.Errorf("%s/%d: %v, want POLICY_VIOLATION", r.Topic, r.Partition, r.Err)
		}
	})
	// kadm drops topics its Metadata cannot see; the raw request names them.
	raw := kmsg.NewPtrOffsetCommitRequest()
	raw.Group = "kadm-reset"
	for _, tp := range []struct {
		topic     string
		partition int32
	}{{"not-its-topic", 0}, {s.Topic, 99}} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = tp.topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = tp.partition, 0
		rt.Partitions = append(rt.Partitions, rp)
		raw.Topics = append(raw.Topics, rt)
	}
	rawResp, err := raw.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range rawResp.Topics {
		want := kerr.TopicAuthorizationFailed
		if rt.Topic == s.Topic {
			want = kerr.UnknownTopicOrPartition
		}
		if got := kerr.ErrorForCode(rt.Partitions[0].ErrorCode); got != want {
			t.Errorf("admin commit of %s/%d: %v, want %v", rt.Topic, rt.Partitions[0].Partition, got, want)
		}
	}
	lines := policyLines(logs)
	if len(lines) != int(s.Partitions) {
		t.Errorf("gateway logged %d refused commits, want %d", len(lines), s.Partitions)
	}
	for _, e := range lines {
		checkPolicyLine(t, e, "kadm-reset", s.Topic, -1, 0, "0", token)
	}
	unmoved(t, s, "kadm-reset")
}
