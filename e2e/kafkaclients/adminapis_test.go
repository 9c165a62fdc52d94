package kafkaclients

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestAdminWritesRefusedAtOnce: the admin APIs the listener does not
// serve — creating, deleting and growing topics, deleting records,
// configs, ACLs, deleting groups and their offsets, leader elections,
// reassignments, log dirs, SCRAM users, transactions — are absent from
// ApiVersions, so kadm refuses each locally ("broker is too old")
// without sending it: never a hang, never a dropped connection. Each
// call answers within 5 s although its context allows 20 s (a hang runs
// to the context's end; kgo may first read metadata, to find a
// controller or leaders, a round trip a loaded 2-core machine can stall
// past a second), and the same client reads metadata afterwards over the
// connection it had. Nothing reaches Kafka: the topic kadm asked to
// create does not exist. (A raw request of such a key closes its
// connection, as Kafka closes one for a key it does not know:
// TestBadInputOnTheListener "unknown api key".)
func TestAdminWritesRefusedAtOnce(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	cred := tenantCredential(t, s, "tenant-a", []string{"a-*"})
	adm := kadm.NewClient(kgoClient(t, s.KafkaAddrs(), cred, false))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adm.ListTopics(ctx, "orders"); err != nil {
		t.Fatalf("metadata before: %v", err)
	}
	calls := map[string]func() error{
		"CreateTopics": func() error {
			r, err := adm.CreateTopics(ctx, 1, 1, nil, "created-through-capgate")
			return firstErr(err, r.Error())
		},
		"DeleteTopics": func() error {
			r, err := adm.DeleteTopics(ctx, "orders")
			return firstErr(err, r.Error())
		},
		"CreatePartitions": func() error {
			r, err := adm.CreatePartitions(ctx, 1, "orders")
			return firstErr(err, r.Error())
		},
		"DeleteRecords": func() error {
			o := kadm.Offsets{}
			o.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 1})
			r, err := adm.DeleteRecords(ctx, o)
			return firstErr(err, r.Error())
		},
		"DescribeTopicConfigs": func() error {
			r, err := adm.DescribeTopicConfigs(ctx, "orders")
			if err == nil {
				for _, c := range r {
					err = firstErr(err, c.Err)
				}
			}
			return err
		},
		"AlterTopicConfigs": func() error {
			v := "1000"
			r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &v}}, "orders")
			if err == nil {
				for _, c := range r {
					err = firstErr(err, c.Err)
				}
			}
			return err
		},
		"DescribeACLs": func() error {
			b := kadm.NewACLs().Topics("orders").Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
			r, err := adm.DescribeACLs(ctx, b)
			if err == nil && len(r) > 0 {
				err = r[0].Err
			}
			return err
		},
		"DeleteGroups": func() error {
			r, err := adm.DeleteGroups(ctx, "a-orders")
			return firstErr(err, r.Error())
		},
		"DeleteOffsets": func() error {
			ts := kadm.TopicsSet{}
			ts.Add("orders", 0)
			r, err := adm.DeleteOffsets(ctx, "a-orders", ts)
			return firstErr(err, r.Error())
		},
		"ElectLeaders": func() error {
			_, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
			return err
		},
		"ListPartitionReassignments": func() error {
			ts := kadm.TopicsSet{}
			ts.Add("orders", 0)
			_, err := adm.ListPartitionReassignments(ctx, ts)
			return err
		},
		"DescribeAllLogDirs": func() error {
			_, err := adm.DescribeAllLogDirs(ctx, nil)
			return err
		},
		"DescribeUserSCRAMs": func() error {
			_, err := adm.DescribeUserSCRAMs(ctx)
			return err
		},
		"ListTransactions": func() error {
			_, err := adm.ListTransactions(ctx, nil, nil)
			return err
		},
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		took := time.Since(start)
		switch {
		case err == nil:
			t.Errorf("%s: answered without an error", name)
		case took > 5*time.Second:
			t.Errorf("%s: refused after %v (%v), want at once", name, took, err)
		case !strings.Contains(err.Error(), "broker is too old"):
			t.Errorf("%s: %v, want kadm's local refusal (not in ApiVersions)", name, err)
		}
	}
	if _, err := adm.ListTopics(ctx, "orders"); err != nil {
		t.Fatalf("metadata after: %v", err)
	}
	direct, err := kadm.NewClient(directClient(t, s)).ListTopics(ctx, "created-through-capgate")
	if err != nil {
		t.Fatal(err)
	}
	if d := direct["created-through-capgate"]; d.Err == nil {
		t.Fatalf("the topic kadm asked the listener to create exists in Kafka: %+v", d)
	}
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
}

// TestKafkaJSAdminWritesRefusedAtOnce: KafkaJS's admin client, unmodified,
// refuses the admin writes the listener does not serve — createTopics,
// deleteTopics, createPartitions, deleteTopicRecords, deleteGroups,
// describeConfigs, alterConfigs, describeAcls, createAcls — itself, at
// once, from ApiVersions (KafkaJSServerDoesNotSupportApiKey, not
// retried): no hang, no dropped connection, nothing created in Kafka.
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
		switch {
		case w.OK:
			t.Errorf("%s: succeeded through the listener", w.Op)
		case !strings.Contains(w.Name+w.Err, "ServerDoesNotSupportApiKey") && !strings.Contains(w.Err, "does not support"):
			t.Errorf("%s: %s %s, want KafkaJS's local refusal (the key is not in ApiVersions)", w.Op, w.Name, w.Err)
		case w.Ms > 1000:
			t.Errorf("%s: refused after %d ms, want at once", w.Op, w.Ms)
		}
	}
	if seen != 9 {
		t.Fatalf("admin.js answered %d writes, want 9:\n%s", seen, out)
	}
	direct, err := kadm.NewClient(directClient(t, s)).ListTopics(ctx, "created-through-capgate")
	if err != nil {
		t.Fatal(err)
	}
	if d := direct["created-through-capgate"]; d.Err == nil {
		t.Fatalf("the topic KafkaJS asked the listener to create exists in Kafka: %+v", d)
	}
}
