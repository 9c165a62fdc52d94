package kafkaproto

// Behavior: the Kafka admin requests that administer Kafka itself —
// CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords,
// DescribeConfigs, AlterConfigs, IncrementalAlterConfigs — are listed in
// ApiVersions and answered with a refusal on every entry they name:
// TOPIC_AUTHORIZATION_FAILED for a topic (CLUSTER_AUTHORIZATION_FAILED
// for a config resource that is not a topic), as Kafka answers a
// principal its ACLs do not let do it, with an error message saying
// where to do it instead, in the versions that carry one (CreateTopics
// v1+, DeleteTopics v5+, CreatePartitions, the configs APIs; DeleteRecords
// has none). Nothing reaches Kafka. The gateway logs each refusal at
// warn (refusallog's bound) with the API, the client and the first
// topic named.
//
// Before, these keys were absent from ApiVersions, so clients refused
// them without asking: kadm said "broker is too old", KafkaJS
// KafkaJSServerDoesNotSupportApiKey, the Java client
// UnsupportedVersionException — a version lie a platform engineer reads
// as "upgrade capgate" (newuser11). The rest of Kafka's admin APIs
// (ACLs, DeleteGroups, OffsetDelete, elections, reassignments, log dirs,
// SCRAM, transactions) are still not listed.
//
// Their bodies are bounded by refusedBodyMax before kmsg decodes them
// (parseRequest): an answer echoes every topic, partition or resource a
// request names, and no admin tool names thousands in one request.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// refusedBodyMax bounds the body of a refused admin request: beyond, the
// connection closes unanswered (errTooManyEntries), as for a request
// over kafka_max_request_partitions.
const refusedBodyMax = 64 << 10

// refusedAdminAPIs are the rows of the refused admin APIs: every version
// kmsg parses, from 0.
func refusedAdminAPIs() []apiRow {
	row := func(key kmsg.Key, max int16) apiRow {
		return apiRow{key: int16(key), min: 0, max: max, bodyMax: refusedBodyMax, handle: handleRefusedAdmin}
	}
	return []apiRow{
		row(kmsg.CreateTopics, 7),
		row(kmsg.DeleteTopics, 6),
		row(kmsg.DeleteRecords, 2),
		row(kmsg.DescribeConfigs, 4),
		row(kmsg.AlterConfigs, 2),
		row(kmsg.CreatePartitions, 3),
		row(kmsg.IncrementalAlterConfigs, 1),
	}
}

// refusedAdminMessage is the error message of a refused admin request:
// what the listener does not do, and where to do it.
func refusedAdminMessage(what string) string {
	return fmt.Sprintf("capgate's Kafka listener does not %s: it serves consumers, producers and reads of their groups; "+
		"%s on Kafka itself, at its own bootstrap servers", what, what)
}

// handleRefusedAdmin answers a refused admin request: every entry it
// names refused, nothing sent to Kafka.
func handleRefusedAdmin(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	resp, what, first := refuseAdmin(kreq)
	c.s.refused.Refused("kafka "+kmsg.NameForKey(kreq.Key()), refusedAdminMessage(what)+" (answered "+authorizationFailed(first.resource).Message+")",
		append(c.logFields(false), zap.String("first", first.name))...)
	return resp, nil
}

// refusedEntry is the first entry a refused request names, for the log.
type refusedEntry struct {
	name     string
	resource kmsg.ConfigResourceType // topic for the topic APIs
}

// authorizationFailed is the refusal of an entry: a topic's, or the
// cluster's for a broker (or other) config resource.
func authorizationFailed(resource kmsg.ConfigResourceType) *kerr.Error {
	if resource == kmsg.ConfigResourceTypeTopic {
		return kerr.TopicAuthorizationFailed
	}
	return kerr.ClusterAuthorizationFailed
}

// refuseAdmin builds the answer to a refused admin request, and says
// what it asked in words and the first entry it named.
func refuseAdmin(kreq kmsg.Request) (kmsg.Response, string, refusedEntry) {
	switch req := kreq.(type) {
	case *kmsg.CreateTopicsRequest:
		return refuseCreateTopics(req)
	case *kmsg.DeleteTopicsRequest:
		return refuseDeleteTopics(req)
	case *kmsg.CreatePartitionsRequest:
		return refuseCreatePartitions(req)
	case *kmsg.DeleteRecordsRequest:
		return refuseDeleteRecords(req)
	case *kmsg.DescribeConfigsRequest:
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		first := refuseConfigs(len(req.Resources), "describe configs", func(i int) (kmsg.ConfigResourceType, string) {
			return req.Resources[i].ResourceType, req.Resources[i].ResourceName
		}, func(t kmsg.ConfigResourceType, name string, code int16, msg *string) {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = t, name, code, msg
			resp.Resources = append(resp.Resources, rr)
		})
		return resp, "describe configs", first
	case *kmsg.AlterConfigsRequest:
		resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
		first := refuseConfigs(len(req.Resources), "alter configs", func(i int) (kmsg.ConfigResourceType, string) {
			return req.Resources[i].ResourceType, req.Resources[i].ResourceName
		}, func(t kmsg.ConfigResourceType, name string, code int16, msg *string) {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = t, name, code, msg
			resp.Resources = append(resp.Resources, rr)
		})
		return resp, "alter configs", first
	case *kmsg.IncrementalAlterConfigsRequest:
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		first := refuseConfigs(len(req.Resources), "alter configs", func(i int) (kmsg.ConfigResourceType, string) {
			return req.Resources[i].ResourceType, req.Resources[i].ResourceName
		}, func(t kmsg.ConfigResourceType, name string, code int16, msg *string) {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = t, name, code, msg
			resp.Resources = append(resp.Resources, rr)
		})
		return resp, "alter configs", first
	}
	panic(fmt.Sprintf("kafkaproto: refuseAdmin of %T, a key not in refusedAdminAPIs", kreq))
}

// topicEntry is the first entry of a topic API: its first topic.
func topicEntry(names ...string) refusedEntry {
	first := refusedEntry{resource: kmsg.ConfigResourceTypeTopic}
	if len(names) > 0 {
		first.name = names[0]
	}
	return first
}

func refuseCreateTopics(req *kmsg.CreateTopicsRequest) (kmsg.Response, string, refusedEntry) {
	const what = "create topics"
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	msg := refusedAdminMessage(what)
	var names []string
	for _, t := range req.Topics {
		names = append(names, t.Topic)
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, kerr.TopicAuthorizationFailed.Code, &msg
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, what, topicEntry(names...)
}

// refuseDeleteTopics answers by name (v0-v5's TopicNames) or by name or
// id (v6's Topics), echoing what each named.
func refuseDeleteTopics(req *kmsg.DeleteTopicsRequest) (kmsg.Response, string, refusedEntry) {
	const what = "delete topics"
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	msg := refusedAdminMessage(what)
	var names []string
	answer := func(name *string, id [16]byte) {
		if name != nil {
			names = append(names, *name)
		}
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode, rt.ErrorMessage = name, id, kerr.TopicAuthorizationFailed.Code, &msg
		resp.Topics = append(resp.Topics, rt)
	}
	for i := range req.TopicNames {
		answer(&req.TopicNames[i], [16]byte{})
	}
	for _, t := range req.Topics {
		answer(t.Topic, t.TopicID)
	}
	return resp, what, topicEntry(names...)
}

func refuseCreatePartitions(req *kmsg.CreatePartitionsRequest) (kmsg.Response, string, refusedEntry) {
	const what = "add partitions"
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	msg := refusedAdminMessage(what)
	var names []string
	for _, t := range req.Topics {
		names = append(names, t.Topic)
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, kerr.TopicAuthorizationFailed.Code, &msg
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, what, topicEntry(names...)
}

// refuseDeleteRecords refuses every partition; DeleteRecords carries no
// error message (the log says why).
func refuseDeleteRecords(req *kmsg.DeleteRecordsRequest) (kmsg.Response, string, refusedEntry) {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	var names []string
	for _, t := range req.Topics {
		names = append(names, t.Topic)
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark, rp.ErrorCode = p.Partition, -1, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, "delete records", topicEntry(names...)
}

// refuseConfigs answers each of n config resources (resource(i)) with
// its refusal through add, and returns the first.
func refuseConfigs(n int, what string, resource func(int) (kmsg.ConfigResourceType, string),
	add func(kmsg.ConfigResourceType, string, int16, *string)) refusedEntry {
	msg := refusedAdminMessage(what)
	first := topicEntry()
	for i := range n {
		t, name := resource(i)
		if i == 0 {
			first = refusedEntry{name: name, resource: t}
		}
		add(t, name, authorizationFailed(t).Code, &msg)
	}
	return first
}
