package kafkaclients

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// refusal is one admin call's answer through the listener: its error and
// the error message the answer carried (when its version has one).
type refusal struct {
	err     error
	message string
}

// TestAdminWritesRefusedAtOnce: the admin APIs that administer Kafka
// itself — creating, deleting and growing topics, deleting records,
// describing and altering configs — are answered by the listener with a
// refusal naming the reason: TOPIC_AUTHORIZATION_FAILED on each topic
// (CLUSTER_AUTHORIZATION_FAILED for a broker's configs), with a message
// saying the listener does not do it and to do it on Kafka itself. They
// were left out of ApiVersions, and kadm refused each itself with
// "broker is too old", a version lie read as "upgrade capgate"
// (newuser11). Deleting groups and their offsets is refused
// GROUP_AUTHORIZATION_FAILED (DeleteGroups naming capgate admin group
// delete), the ACL APIs CLUSTER_AUTHORIZATION_FAILED (the cluster's own
// administration: TestClusterAdminRefusedAtOnce). Every
// call answers within 5 s although its context allows 20 s (a hang runs
// to the context's end; kgo may first read metadata, a round trip a
// loaded 2-core machine can stall past a second), and the same client
// reads metadata afterwards over the connection it had. Nothing reaches
// Kafka: the topic kadm asked to create does not exist, orders keeps its
// partitions and its records. (A raw request of an unlisted key closes
// its connection, as Kafka closes one for a key it does not know:
// TestBadInputOnTheListener "unknown api key".)
func TestAdminWritesRefusedAtOnce(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	cred := tenantCredential(t, s, "tenant-a", []string{"a-*"})
	cl := kgoClient(t, s.KafkaAddrs(), cred, false)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adm.ListTopics(ctx, "orders"); err != nil {
		t.Fatalf("metadata before: %v", err)
	}
	direct := kadm.NewClient(directClient(t, s))
	alter := func(call func(context.Context, []kadm.AlterConfig, ...string) (kadm.AlterConfigsResponses, error)) refusal {
		v := "1000"
		r, err := call(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &v}}, "orders")
		if err != nil || len(r) != 1 {
			return refusal{err: firstErr(err, fmt.Errorf("%d resources answered", len(r)))}
		}
		return refusal{r[0].Err, r[0].ErrMessage}
	}
	refused := map[string]func() refusal{
		"CreateTopics": func() refusal {
			r, err := adm.CreateTopics(ctx, 1, 1, nil, "created-through-capgate")
			c := r["created-through-capgate"]
			return refusal{firstErr(err, c.Err), c.ErrMessage}
		},
		"DeleteTopics": func() refusal {
			r, err := adm.DeleteTopics(ctx, "orders")
			return refusal{firstErr(err, r["orders"].Err), r["orders"].ErrMessage}
		},
		"CreatePartitions": func() refusal {
			r, err := adm.CreatePartitions(ctx, 1, "orders")
			return refusal{firstErr(err, r["orders"].Err), r["orders"].ErrMessage}
		},
		"DeleteRecords": func() refusal {
			o := kadm.Offsets{}
			o.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 1})
			r, err := adm.DeleteRecords(ctx, o)
			d, _ := r.Lookup("orders", 0)
			return refusal{err: firstErr(err, d.Err), message: "(DeleteRecords carries no message)"}
		},
		"DescribeTopicConfigs": func() refusal {
			// kadm turns an authorization error here into one error for
			// the whole call, without the message: the raw answer has it.
			req := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "orders"
			req.Resources = append(req.Resources, rr)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || len(resp.Resources) != 1 {
				return refusal{err: firstErr(err, fmt.Errorf("%+v answered", resp))}
			}
			return refusal{kerr.ErrorForCode(resp.Resources[0].ErrorCode), unptr(resp.Resources[0].ErrorMessage)}
		},
		"AlterTopicConfigs":      func() refusal { return alter(adm.AlterTopicConfigs) },      // IncrementalAlterConfigs
		"AlterTopicConfigsState": func() refusal { return alter(adm.AlterTopicConfigsState) }, // AlterConfigs
	}
	words := map[string]string{
		"CreateTopics": "does not create topics", "DeleteTopics": "does not delete topics", "CreatePartitions": "does not add partitions",
		"DescribeTopicConfigs": "does not describe configs", "AlterTopicConfigs": "does not alter configs", "AlterTopicConfigsState": "does not alter configs",
		"DeleteRecords": "no message",
	}
	for name, call := range refused {
		start := time.Now()
		r := call()
		took := time.Since(start)
		switch {
		case !errors.Is(r.err, kerr.TopicAuthorizationFailed):
			t.Errorf("%s: %v, want TOPIC_AUTHORIZATION_FAILED from the listener", name, r.err)
		case took > 5*time.Second:
			t.Errorf("%s: refused after %v, want at once", name, took)
		case !strings.Contains(r.message, words[name]) || (name != "DeleteRecords" && !strings.Contains(r.message, "on Kafka itself")):
			t.Errorf("%s: message %q, want it to say the listener %s, and to do it on Kafka itself", name, r.message, words[name])
		}
	}
	// Groups and ACLs: refused as Kafka refuses a principal without the
	// group's DELETE or the cluster's DESCRIBE, the message naming
	// capgate's own way where the answer carries one.
	ts := kadm.TopicsSet{}
	ts.Add("orders", 0)
	deletedOffsets, err := adm.DeleteOffsets(ctx, "a-orders", ts)
	if err = firstErr(err, deletedOffsets.Error()); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("kadm DeleteOffsets: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	deleteGroups := kmsg.NewPtrDeleteGroupsRequest()
	deleteGroups.Groups = []string{"a-orders"}
	if resp, err := deleteGroups.RequestWith(ctx, cl); err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code ||
		!strings.Contains(unptr(resp.Groups[0].ErrorMessage), "capgate admin group delete") {
		t.Errorf("DeleteGroups: %+v (%v), want GROUP_AUTHORIZATION_FAILED naming capgate admin group delete", resp, err)
	}
	describeACLs := kmsg.NewPtrDescribeACLsRequest()
	describeACLs.ResourceType, describeACLs.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	describeACLs.Operation, describeACLs.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if resp, err := describeACLs.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code ||
		!strings.Contains(unptr(resp.ErrorMessage), "does not manage ACLs") {
		t.Errorf("DescribeACLs: %+v (%v), want CLUSTER_AUTHORIZATION_FAILED saying the listener does not manage ACLs", resp, err)
	}
	if _, err := adm.DescribeTopicConfigs(ctx, "orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("kadm DescribeTopicConfigs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if _, err := adm.DescribeBrokerConfigs(ctx, 0); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("kadm DescribeBrokerConfigs: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if _, err := adm.ListTopics(ctx, "orders"); err != nil {
		t.Fatalf("metadata after: %v", err)
	}
	topics, err := direct.ListTopics(ctx, "created-through-capgate", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if d := topics["created-through-capgate"]; d.Err == nil {
		t.Fatalf("the topic kadm asked the listener to create exists in Kafka: %+v", d)
	}
	if d := topics["orders"]; d.Err != nil || len(d.Partitions) != 2 {
		t.Fatalf("orders after the refusals: %+v, want its 2 partitions", d)
	}
	starts, err := direct.ListStartOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("orders", 0); o.Offset != 0 {
		t.Errorf("orders/0 starts at %d after a refused DeleteRecords, want 0", o.Offset)
	}
}

// unptr is *s, or "" for nil.
func unptr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// firstErr is the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// kafkajsWrite is one line of admin.js with WRITES=1.
type kafkajsWrite struct {
	Ev   string `json:"ev"`
	Op   string `json:"op"`
	OK   bool   `json:"ok"`
	Ms   int64  `json:"ms"`
	Name string `json:"name"`
	Err  string `json:"err"`
	Type string `json:"type"` // the Kafka error behind it (admin.js kafkaType)
}

// TestKafkaJSAdminWritesRefusedAtOnce: KafkaJS's admin client, unmodified,
// gets the listener's refusal of the admin writes it does not serve —
// createTopics, deleteTopics, createPartitions, deleteTopicRecords,
// describeConfigs, alterConfigs: TOPIC_AUTHORIZATION_FAILED ("Not
// authorized to access topics"); deleteGroups: GROUP_AUTHORIZATION_FAILED;
// describeAcls, createAcls, alterPartitionReassignments,
// listPartitionReassignments: CLUSTER_AUTHORIZATION_FAILED — not retried,
// at once: no hang, no dropped connection, nothing created in Kafka. It
// said KafkaJSServerDoesNotSupportApiKey for each, the keys being absent
// from ApiVersions: a version lie (newuser11).
func TestKafkaJSAdminWritesRefusedAtOnce(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	cred := tenantCredential(t, s, "tenant-a", []string{"a-*"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "admin.js")
	cmd.Dir = kafkajsDir(t)
	cmd.Env = append(os.Environ(), "BROKERS="+strings.Join(s.KafkaAddrs(), ","), "CAPGATE_TOKEN="+cred, "TOPIC="+s.Topic, "WRITES=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node admin.js: %v\n%s", err, out)
	}
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var w kafkajsWrite
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil || w.Ev != "write" {
			t.Fatalf("admin.js printed %q", sc.Bytes())
		}
		seen++
		want := "TOPIC_AUTHORIZATION_FAILED"
		switch w.Op {
		case "deleteGroups":
			want = "GROUP_AUTHORIZATION_FAILED"
		case "describeAcls", "createAcls", "alterPartitionReassignments", "listPartitionReassignments":
			want = "CLUSTER_AUTHORIZATION_FAILED"
		}
		switch {
		case w.OK:
			t.Errorf("%s: succeeded through the listener", w.Op)
		case w.Type != want:
			t.Errorf("%s: %s %s (%q), want the listener's %s", w.Op, w.Name, w.Err, w.Type, want)
		case w.Ms > 1000:
			t.Errorf("%s: refused after %d ms, want at once", w.Op, w.Ms)
		}
	}
	if seen != 11 {
		t.Fatalf("admin.js answered %d writes, want 11:\n%s", seen, out)
	}
	direct, err := kadm.NewClient(directClient(t, s)).ListTopics(ctx, "created-through-capgate")
	if err != nil {
		t.Fatal(err)
	}
	if d := direct["created-through-capgate"]; d.Err == nil {
		t.Fatalf("the topic KafkaJS asked the listener to create exists in Kafka: %+v", d)
	}
}
