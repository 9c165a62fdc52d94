package kafkaclients

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterAdminRefusedAtOnce: the admin APIs that run Kafka's cluster
// — leader elections, reassignments, log dirs, client quotas, SCRAM
// users, producers and transactions — are answered by the listener with
// Kafka's refusal of a principal without the rights:
// CLUSTER_AUTHORIZATION_FAILED (TOPIC_AUTHORIZATION_FAILED for a
// partition's producers, TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a
// transaction), at once, with a message saying to do it on Kafka itself
// where the answer carries one (quotas: capgate admin qos). They were
// absent from ApiVersions, and kadm refused each itself with "broker is
// too old": a version lie read as "upgrade capgate" (newuser11,
// newuser12). DescribeCluster is answered as Metadata is: the same
// brokers, controller and cluster id.
func TestClusterAdminRefusedAtOnce(t *testing.T) {
	s := Start(t, Options{Partitions: 2})
	cred := tenantCredential(t, s, "tenant-a", []string{"a-*"})
	cl := kgoClient(t, s.KafkaAddrs(), cred, false)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	orders0 := kadm.TopicsSet{}
	orders0.Add("orders", 0)
	refused := []struct {
		name string
		want *kerr.Error
		call func() error
	}{
		{"ElectLeaders", kerr.ClusterAuthorizationFailed, func() error {
			_, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
			return err
		}},
		{"ListPartitionReassignments", kerr.ClusterAuthorizationFailed, func() error {
			_, err := adm.ListPartitionReassignments(ctx, orders0)
			return err
		}},
		{"AlterPartitionAssignments", kerr.ClusterAuthorizationFailed, func() error {
			req := kadm.AlterPartitionAssignmentsReq{}
			req.Assign("orders", 0, []int32{1})
			_, err := adm.AlterPartitionAssignments(ctx, req)
			return err
		}},
		{"DescribeAllLogDirs", kerr.ClusterAuthorizationFailed, func() error {
			_, err := adm.DescribeAllLogDirs(ctx, nil)
			return err
		}},
		{"DescribeUserSCRAMs", kerr.ClusterAuthorizationFailed, func() error {
			_, err := adm.DescribeUserSCRAMs(ctx)
			return err
		}},
		{"DescribeClientQuotas", kerr.ClusterAuthorizationFailed, func() error {
			_, err := adm.DescribeClientQuotas(ctx, false, nil)
			return err
		}},
		{"ListTransactions", kerr.ClusterAuthorizationFailed, func() error {
			_, err := adm.ListTransactions(ctx, nil, nil)
			return err
		}},
		{"DescribeProducers", kerr.TopicAuthorizationFailed, func() error {
			_, err := adm.DescribeProducers(ctx, orders0)
			return err
		}},
		{"DescribeTransactions", kerr.TransactionalIDAuthorizationFailed, func() error {
			_, err := adm.DescribeTransactions(ctx, "tx-1")
			return err
		}},
	}
	for _, r := range refused {
		start := time.Now()
		err := r.call()
		took := time.Since(start)
		switch {
		case !errors.Is(err, r.want):
			t.Errorf("kadm %s: %v, want %s from the listener", r.name, err, r.want.Message)
		case took > 5*time.Second:
			t.Errorf("kadm %s: refused after %v, want at once", r.name, took)
		}
	}

	// The messages, in the answers that carry one (kadm drops most).
	elect := kmsg.NewPtrElectLeadersRequest()
	et := kmsg.NewElectLeadersRequestTopic()
	et.Topic, et.Partitions = "orders", []int32{0, 1}
	elect.Topics = append(elect.Topics, et)
	if resp, err := elect.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(resp.Topics) != 1 ||
		len(resp.Topics[0].Partitions) != 2 || resp.Topics[0].Partitions[1].ErrorCode != kerr.ClusterAuthorizationFailed.Code ||
		!strings.Contains(unptr(resp.Topics[0].Partitions[1].ErrorMessage), "does not elect leaders") {
		t.Errorf("ElectLeaders of orders/0-1: %+v (%v), want CLUSTER_AUTHORIZATION_FAILED on each, saying the listener does not elect leaders", resp, err)
	}
	quotas := kmsg.NewPtrAlterClientQuotasRequest()
	qe := kmsg.NewAlterClientQuotasRequestEntry()
	user := "tenant-a"
	qe.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: &user}}
	qe.Ops = []kmsg.AlterClientQuotasRequestEntryOp{{Key: "consumer_byte_rate", Value: 1000}}
	quotas.Entries = append(quotas.Entries, qe)
	if resp, err := quotas.RequestWith(ctx, cl); err != nil || len(resp.Entries) != 1 || resp.Entries[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code ||
		!strings.Contains(unptr(resp.Entries[0].ErrorMessage), "capgate admin qos") || len(resp.Entries[0].Entity) != 1 || unptr(resp.Entries[0].Entity[0].Name) != user {
		t.Errorf("AlterClientQuotas: %+v (%v), want CLUSTER_AUTHORIZATION_FAILED for user tenant-a naming capgate admin qos", resp, err)
	}
	scram := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	scram.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "alice", Mechanism: 1}}
	if resp, err := scram.RequestWith(ctx, cl); err != nil || len(resp.Results) != 1 || resp.Results[0].User != "alice" ||
		resp.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code || !strings.Contains(unptr(resp.Results[0].ErrorMessage), "on Kafka itself") {
		t.Errorf("AlterUserSCRAMCredentials: %+v (%v), want CLUSTER_AUTHORIZATION_FAILED for alice, to do it on Kafka itself", resp, err)
	}
	dirs := kmsg.NewPtrAlterReplicaLogDirsRequest()
	dt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
	dt.Topic, dt.Partitions = "orders", []int32{0}
	dirs.Dirs = []kmsg.AlterReplicaLogDirsRequestDir{{Dir: "/var/lib/kafka", Topics: []kmsg.AlterReplicaLogDirsRequestDirTopic{dt}}}
	if resp, err := dirs.RequestWith(ctx, cl); err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 ||
		resp.Topics[0].Partitions[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("AlterReplicaLogDirs: %+v (%v), want CLUSTER_AUTHORIZATION_FAILED on orders/0", resp, err)
	}

	// DescribeCluster: Metadata's brokers, controller and cluster id.
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err != nil || cluster.ErrorCode != 0 || cluster.ClusterID != unptr(meta.ClusterID) || cluster.ControllerID != meta.ControllerID ||
		len(cluster.Brokers) != len(meta.Brokers) || len(meta.Brokers) == 0 {
		t.Fatalf("DescribeCluster: %+v (%v), want Metadata's %+v", cluster, err, meta)
	}
	for i, b := range cluster.Brokers {
		if m := meta.Brokers[i]; b.NodeID != m.NodeID || b.Host != m.Host || b.Port != m.Port {
			t.Errorf("DescribeCluster broker %d: %+v, Metadata says %+v", i, b, m)
		}
	}
	controllers := kmsg.NewPtrDescribeClusterRequest()
	controllers.EndpointType = 2
	if resp, err := controllers.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Errorf("DescribeCluster of the controllers: %+v (%v), want UNSUPPORTED_ENDPOINT_TYPE", resp, err)
	}
	if _, err := adm.ListTopics(ctx, "orders"); err != nil {
		t.Fatalf("metadata after: %v", err)
	}
}
