package kafkaproto

// Behavior: the Kafka admin requests that run Kafka's cluster — leader
// elections (ElectLeaders v1+), reassignments (AlterPartitionAssignments,
// ListPartitionReassignments), log dirs (DescribeLogDirs,
// AlterReplicaLogDirs), client quotas (DescribeClientQuotas,
// AlterClientQuotas), SCRAM users (DescribeUserSCRAMCredentials,
// AlterUserSCRAMCredentials), producers and transactions
// (DescribeProducers, DescribeTransactions, ListTransactions) — are
// listed in ApiVersions and refused as adminrefused.go's are, entry by
// entry, as Kafka refuses a principal without the cluster's ALTER or
// DESCRIBE: CLUSTER_AUTHORIZATION_FAILED (on the request and on every
// partition, user or quota entity it names), TOPIC_AUTHORIZATION_FAILED
// for a partition's producers, TRANSACTIONAL_ID_AUTHORIZATION_FAILED for
// a transactional id; with the error message, where the version has one,
// saying to do it on Kafka itself (quotas: capgate's own throttles are
// capgate admin qos). Nothing reaches Kafka or the coordinator.
//
// They were absent from ApiVersions, so kadm said "broker is too old"
// and KafkaJS KafkaJSServerDoesNotSupportApiKey (newuser11, newuser12).
//
// ElectLeaders v0 is not listed: it has no request-level error, and a
// request for every partition (no topics named) would be answered with
// no refusal at all.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// refusedClusterAPIs are the rows of the refused cluster admin APIs:
// every version kmsg parses (ElectLeaders from 1).
func refusedClusterAPIs() []apiRow {
	row := func(key kmsg.Key, min, max int16) apiRow {
		return apiRow{key: int16(key), min: min, max: max, bodyMax: refusedBodyMax, handle: handleRefusedAdmin}
	}
	return []apiRow{
		row(kmsg.AlterReplicaLogDirs, 0, 2),
		row(kmsg.DescribeLogDirs, 0, 5),
		row(kmsg.ElectLeaders, 1, 2),
		row(kmsg.AlterPartitionAssignments, 0, 1),
		row(kmsg.ListPartitionReassignments, 0, 0),
		row(kmsg.DescribeClientQuotas, 0, 1),
		row(kmsg.AlterClientQuotas, 0, 1),
		row(kmsg.DescribeUserSCRAMCredentials, 0, 0),
		row(kmsg.AlterUserSCRAMCredentials, 0, 0),
		row(kmsg.DescribeProducers, 0, 0),
		row(kmsg.DescribeTransactions, 0, 0),
		row(kmsg.ListTransactions, 0, 2),
	}
}

// clusterRefusal is CLUSTER_AUTHORIZATION_FAILED on entry name.
func clusterRefusal(name string) refusedEntry {
	return refusedEntry{name: name, refusal: kerr.ClusterAuthorizationFailed}
}

// refuseClusterAdmin builds the answer to a refused cluster admin
// request, its message and the first entry it named.
func refuseClusterAdmin(kreq kmsg.Request) (kmsg.Response, string, refusedEntry) {
	switch req := kreq.(type) {
	case *kmsg.ElectLeadersRequest:
		return refuseElectLeaders(req)
	case *kmsg.AlterPartitionAssignmentsRequest:
		return refuseAlterPartitionAssignments(req)
	case *kmsg.ListPartitionReassignmentsRequest:
		resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		msg := refusedAdminMessage("list partition reassignments")
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, &msg
		return resp, msg, clusterRefusal("cluster")
	case *kmsg.DescribeLogDirsRequest, *kmsg.AlterReplicaLogDirsRequest:
		return refuseLogDirs(kreq)
	case *kmsg.DescribeClientQuotasRequest, *kmsg.AlterClientQuotasRequest:
		return refuseQuotas(kreq)
	case *kmsg.DescribeUserSCRAMCredentialsRequest, *kmsg.AlterUserSCRAMCredentialsRequest:
		return refuseSCRAM(kreq)
	case *kmsg.DescribeProducersRequest, *kmsg.DescribeTransactionsRequest, *kmsg.ListTransactionsRequest:
		return refuseTransactions(kreq)
	}
	panic(fmt.Sprintf("kafkaproto: refuseAdmin of %T, a key not in refusedAdminAPIs", kreq))
}

// refusedPartitions answers each of the request's topics: names reads a
// topic's name and partitions, answer appends the topic's refusal to
// the response. The first entry names the first topic.
func refusedPartitions[T any](topics []T, names func(T) (string, []int32), refusal *kerr.Error, answer func(string, []int32)) refusedEntry {
	first := refusedEntry{name: "cluster", refusal: refusal}
	for i, t := range topics {
		name, partitions := names(t)
		if i == 0 {
			first.name = name
		}
		answer(name, partitions)
	}
	return first
}

// refuseElectLeaders refuses the request (v1+'s ErrorCode) and every
// partition it names; no topics named means every partition, refused by
// the request's error alone.
func refuseElectLeaders(req *kmsg.ElectLeadersRequest) (kmsg.Response, string, refusedEntry) {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	msg := refusedAdminMessage("elect leaders")
	each := newEntryMessages(msg)
	code := kerr.ClusterAuthorizationFailed.Code
	resp.ErrorCode = code
	first := refusedPartitions(req.Topics, func(t kmsg.ElectLeadersRequestTopic) (string, []int32) { return t.Topic, t.Partitions },
		kerr.ClusterAuthorizationFailed, func(topic string, partitions []int32) {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = topic
			for _, p := range partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code, each.next()
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		})
	return resp, msg, first
}

func refuseAlterPartitionAssignments(req *kmsg.AlterPartitionAssignmentsRequest) (kmsg.Response, string, refusedEntry) {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	msg := refusedAdminMessage("reassign partitions")
	each := newEntryMessages(msg)
	code := kerr.ClusterAuthorizationFailed.Code
	resp.ErrorCode, resp.ErrorMessage = code, &msg
	first := refusedPartitions(req.Topics, func(t kmsg.AlterPartitionAssignmentsRequestTopic) (string, []int32) {
		var ps []int32
		for _, p := range t.Partitions {
			ps = append(ps, p.Partition)
		}
		return t.Topic, ps
	}, kerr.ClusterAuthorizationFailed, func(topic string, partitions []int32) {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = topic
		for _, p := range partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code, each.next()
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	})
	return resp, msg, first
}

// refuseLogDirs refuses DescribeLogDirs (v3+'s request error, and one
// log dir answered with the error, which v0-v2 have alone: Kafka
// answers those an unauthorized principal with no dirs, which reads as
// a broker without any) and each partition of an AlterReplicaLogDirs
// (neither carries a message: the log says why).
func refuseLogDirs(kreq kmsg.Request) (kmsg.Response, string, refusedEntry) {
	code := kerr.ClusterAuthorizationFailed.Code
	switch req := kreq.(type) {
	case *kmsg.DescribeLogDirsRequest:
		resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
		resp.ErrorCode = code
		d := kmsg.NewDescribeLogDirsResponseDir()
		d.ErrorCode = code
		resp.Dirs = append(resp.Dirs, d)
		return resp, refusedAdminMessage("describe log dirs"), clusterRefusal("cluster")
	case *kmsg.AlterReplicaLogDirsRequest:
		resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
		first := clusterRefusal("cluster")
		for i, d := range req.Dirs {
			if i == 0 {
				first.name = d.Dir
			}
			for _, t := range d.Topics {
				rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
		return resp, refusedAdminMessage("move replicas between log dirs"), first
	}
	panic(fmt.Sprintf("kafkaproto: refuseLogDirs of %T", kreq))
}

// refuseQuotas refuses Kafka's client quotas: the request's error
// (describe) or each entity's (alter), the message naming capgate's own
// throttles.
func refuseQuotas(kreq kmsg.Request) (kmsg.Response, string, refusedEntry) {
	msg := "capgate's Kafka listener does not manage Kafka's client quotas: set them on Kafka itself, at its own bootstrap servers; " +
		"capgate throttles its own clients with capgate admin qos"
	each := newEntryMessages(msg)
	code := kerr.ClusterAuthorizationFailed.Code
	first := clusterRefusal("cluster")
	switch req := kreq.(type) {
	case *kmsg.DescribeClientQuotasRequest:
		resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp, msg, first
	case *kmsg.AlterClientQuotasRequest:
		resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
		for _, e := range req.Entries {
			re := kmsg.NewAlterClientQuotasResponseEntry()
			re.ErrorCode, re.ErrorMessage = code, each.next()
			for _, en := range e.Entity {
				ren := kmsg.NewAlterClientQuotasResponseEntryEntity()
				ren.Type, ren.Name = en.Type, en.Name
				re.Entity = append(re.Entity, ren)
			}
			resp.Entries = append(resp.Entries, re)
		}
		return resp, msg, first
	}
	panic(fmt.Sprintf("kafkaproto: refuseQuotas of %T", kreq))
}

// refuseSCRAM refuses Kafka's SCRAM users: the request's error and each
// user named (describe), each deletion's and upsertion's user (alter).
// capgate's clients authenticate with its tokens, never SCRAM.
func refuseSCRAM(kreq kmsg.Request) (kmsg.Response, string, refusedEntry) {
	msg := refusedAdminMessage("manage SCRAM users") + " (capgate's clients authenticate with capgate tokens: OAUTHBEARER, or PLAIN with the token as the password)"
	each := newEntryMessages(msg)
	code := kerr.ClusterAuthorizationFailed.Code
	first := clusterRefusal("cluster")
	var users []string
	switch req := kreq.(type) {
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		for _, u := range req.Users {
			users = append(users, u.Name)
			r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode, r.ErrorMessage = u.Name, code, each.next()
			resp.Results = append(resp.Results, r)
		}
		return resp, msg, namedFirst(first, users)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		for _, d := range req.Deletions {
			users = append(users, d.Name)
		}
		for _, u := range req.Upsertions {
			users = append(users, u.Name)
		}
		for _, u := range users {
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode, r.ErrorMessage = u, code, each.next()
			resp.Results = append(resp.Results, r)
		}
		return resp, msg, namedFirst(first, users)
	}
	panic(fmt.Sprintf("kafkaproto: refuseSCRAM of %T", kreq))
}

// namedFirst is first named for names[0], if any.
func namedFirst(first refusedEntry, names []string) refusedEntry {
	if len(names) > 0 {
		first.name = names[0]
	}
	return first
}

// refuseTransactions refuses a partition's producers
// (TOPIC_AUTHORIZATION_FAILED with the message), each transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and the list of transactions
// (CLUSTER_AUTHORIZATION_FAILED; neither carries a message).
func refuseTransactions(kreq kmsg.Request) (kmsg.Response, string, refusedEntry) {
	switch req := kreq.(type) {
	case *kmsg.DescribeProducersRequest:
		resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
		msg := refusedAdminMessage("describe producers")
		each := newEntryMessages(msg)
		code := kerr.TopicAuthorizationFailed.Code
		first := refusedPartitions(req.Topics, func(t kmsg.DescribeProducersRequestTopic) (string, []int32) { return t.Topic, t.Partitions },
			kerr.TopicAuthorizationFailed, func(topic string, partitions []int32) {
				rt := kmsg.NewDescribeProducersResponseTopic()
				rt.Topic = topic
				for _, p := range partitions {
					rp := kmsg.NewDescribeProducersResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.ErrorMessage = p, code, each.next()
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			})
		return resp, msg, first
	case *kmsg.DescribeTransactionsRequest:
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range req.TransactionalIDs {
			s := kmsg.NewDescribeTransactionsResponseTransactionState()
			s.TransactionalID, s.ErrorCode = id, kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, s)
		}
		first := namedFirst(refusedEntry{refusal: kerr.TransactionalIDAuthorizationFailed}, req.TransactionalIDs)
		return resp, refusedAdminMessage("describe transactions"), first
	case *kmsg.ListTransactionsRequest:
		resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, refusedAdminMessage("list transactions"), clusterRefusal("cluster")
	}
	panic(fmt.Sprintf("kafkaproto: refuseTransactions of %T", kreq))
}
