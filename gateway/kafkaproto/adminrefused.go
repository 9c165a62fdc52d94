package kafkaproto

// Behavior: the Kafka admin requests that administer Kafka itself or
// delete groups — CreateTopics, DeleteTopics, CreatePartitions,
// DeleteRecords, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs,
// DescribeAcls, CreateAcls, DeleteAcls, DeleteGroups, OffsetDelete — are
// listed in ApiVersions and answered with a refusal on every entry they
// name, as Kafka answers a principal its ACLs do not let do it:
// TOPIC_AUTHORIZATION_FAILED for a topic, CLUSTER_AUTHORIZATION_FAILED
// for a config resource that is not a topic and for the ACL APIs,
// GROUP_AUTHORIZATION_FAILED for a group — with an error message saying
// where to do it instead, in the versions that carry one (CreateTopics
// v1+, DeleteTopics v5+, DeleteGroups v3+, CreatePartitions, the configs
// and ACL APIs; DeleteRecords and OffsetDelete have none). Nothing
// reaches Kafka or the coordinator. The gateway logs each refusal at
// warn (refusallog's bound) with the API, the message, the client and
// the first entry named.
//
// Before, these keys were absent from ApiVersions, so clients refused
// them without asking: kadm said "broker is too old", KafkaJS
// KafkaJSServerDoesNotSupportApiKey, the Java client
// UnsupportedVersionException — a version lie a platform engineer reads
// as "upgrade capgate" (newuser11). The cluster's own administration
// (elections, reassignments, log dirs, quotas, SCRAM users, producers
// and transactions) is refused likewise: adminrefusedcluster.go.
//
// Their bodies are bounded by refusedBodyMax before kmsg decodes them
// (parseRequest), and the entries they name by refusedEntriesMax: an
// answer echoes every topic, partition or resource a request names, most
// with the ~200-byte message, and no admin tool names thousands in one
// request. Past either the connection closes unanswered. And an answer
// is built only while its holder has room among the answers held
// (answerRoom, as the admin reads): else the connection closes. Before,
// a 64 KiB DeleteTopics v5 of ~65,000 empty names was answered 11 MB
// (DeleteGroups v3 7 MB, DescribeConfigs v4 3 MB), and one credential's
// connections reading nothing held ~2.9 GB, past max_answer_bytes_held,
// whose count then refused every tenant's fetch answers (redteam19 #1).

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// refusedBodyMax bounds the body of a refused admin request: beyond, the
// connection closes unanswered (errTooManyEntries), as for a request
// over kafka_max_request_partitions.
const refusedBodyMax = 64 << 10

// refusedEntriesMax bounds the entries (topics, partitions, resources,
// ACL creations or filters, groups) a refused admin request may name:
// beyond, the connection closes unanswered, so an answer is at most
// ~300 KiB (the names it echoes are within refusedBodyMax).
const refusedEntriesMax = 1000

// errAnswersHeld: a refused admin request came while its holder's
// answers not yet read filled their bound; the connection closes.
var errAnswersHeld = errors.New("kafkaproto: the holder's answers not yet read fill max_answer_bytes_held(_per_holder)")

// refusedAdminAPIs are the rows of the refused admin APIs: every version
// kmsg parses, from 0.
func refusedAdminAPIs() []apiRow {
	row := func(key kmsg.Key, max int16) apiRow {
		return apiRow{key: int16(key), min: 0, max: max, bodyMax: refusedBodyMax, handle: handleRefusedAdmin}
	}
	rows := []apiRow{
		row(kmsg.CreateTopics, 7),
		row(kmsg.DeleteTopics, 6),
		row(kmsg.DeleteRecords, 2),
		row(kmsg.DescribeConfigs, 4),
		row(kmsg.AlterConfigs, 2),
		row(kmsg.CreatePartitions, 3),
		row(kmsg.IncrementalAlterConfigs, 1),
		row(kmsg.DescribeACLs, 3),
		row(kmsg.CreateACLs, 3),
		row(kmsg.DeleteACLs, 3),
		row(kmsg.DeleteGroups, 3),
		row(kmsg.OffsetDelete, 0),
	}
	return append(rows, refusedClusterAPIs()...)
}

// refusedMessagesMax is how many entries of one refused answer carry its
// message; later entries carry the error code alone. An answer echoes
// every entry its request names: with the message on each, 40 KB of
// one-byte topic names (DeleteTopics v5) were answered with 3.5 MB, a
// DescribeUserScramCredentials of 60 KB with 5.8 MB — a hundredfold, held
// for a client that need not read it (TestRefusedAnswersAreNotAmplified).
// No admin tool shows more than the first few reasons of one call.
const refusedMessagesMax = 100

// entryMessages hands a refused answer's message to its first
// refusedMessagesMax entries, nil to the rest.
type entryMessages struct {
	msg  *string
	left int
}

func newEntryMessages(msg string) *entryMessages {
	return &entryMessages{msg: &msg, left: refusedMessagesMax}
}

// next is the message of the next entry.
func (m *entryMessages) next() *string {
	if m.left == 0 {
		return nil
	}
	m.left--
	return m.msg
}

// refusedAdminMessage is the error message of a refused admin request:
// what the listener does not do, and where to do it.
func refusedAdminMessage(what string) string {
	return fmt.Sprintf("capgate's Kafka listener does not %s: it serves consumers, producers and reads of their groups; "+
		"%s on Kafka itself, at its own bootstrap servers", what, what)
}

// handleRefusedAdmin answers a refused admin request: every entry it
// names refused, nothing sent on.
func handleRefusedAdmin(c *conn, h header, kreq kmsg.Request) (kmsg.Response, error) {
	if n := refusedEntries(kreq); n > refusedEntriesMax {
		err := fmt.Errorf("%w: %s v%d naming %d entries, over the %d a refused admin request may name", errTooManyEntries, kmsg.NameForKey(h.key), h.version, n, refusedEntriesMax)
		c.refuseEntries(h, err)
		return nil, err
	}
	if !c.answerRoom() {
		c.s.refused.Refused("kafka "+kmsg.NameForKey(kreq.Key()), errAnswersHeld.Error()+": connection closed", c.logFields(false)...)
		return nil, errAnswersHeld
	}
	resp, msg, first := refuseAdmin(kreq)
	c.s.refused.Refused("kafka "+kmsg.NameForKey(kreq.Key()), msg+" (answered "+first.refusal.Message+")",
		append(c.logFields(false), zap.String("first", first.name))...)
	return resp, nil
}

// refusedEntries is how many entries a refused admin request names, its
// partitions counted with their topics.
func refusedEntries(kreq kmsg.Request) int {
	switch req := kreq.(type) {
	case *kmsg.CreateTopicsRequest:
		return len(req.Topics)
	case *kmsg.DeleteTopicsRequest:
		return len(req.TopicNames) + len(req.Topics)
	case *kmsg.CreatePartitionsRequest:
		return len(req.Topics)
	case *kmsg.DeleteRecordsRequest:
		return withPartitions(req.Topics, func(t kmsg.DeleteRecordsRequestTopic) int { return len(t.Partitions) })
	case *kmsg.DescribeConfigsRequest:
		return len(req.Resources)
	case *kmsg.AlterConfigsRequest:
		return len(req.Resources)
	case *kmsg.IncrementalAlterConfigsRequest:
		return len(req.Resources)
	case *kmsg.CreateACLsRequest:
		return len(req.Creations)
	case *kmsg.DeleteACLsRequest:
		return len(req.Filters)
	case *kmsg.DeleteGroupsRequest:
		return len(req.Groups)
	case *kmsg.OffsetDeleteRequest:
		return withPartitions(req.Topics, func(t kmsg.OffsetDeleteRequestTopic) int { return len(t.Partitions) })
	// The cluster APIs (adminrefusedcluster.go): the same bound, each
	// partition, user, quota entity or transaction answered.
	case *kmsg.ElectLeadersRequest:
		return withPartitions(req.Topics, func(t kmsg.ElectLeadersRequestTopic) int { return len(t.Partitions) })
	case *kmsg.AlterPartitionAssignmentsRequest:
		return withPartitions(req.Topics, func(t kmsg.AlterPartitionAssignmentsRequestTopic) int { return len(t.Partitions) })
	case *kmsg.ListPartitionReassignmentsRequest:
		return withPartitions(req.Topics, func(t kmsg.ListPartitionReassignmentsRequestTopic) int { return len(t.Partitions) })
	case *kmsg.DescribeLogDirsRequest:
		return withPartitions(req.Topics, func(t kmsg.DescribeLogDirsRequestTopic) int { return len(t.Partitions) })
	case *kmsg.AlterReplicaLogDirsRequest:
		return withPartitions(req.Dirs, func(d kmsg.AlterReplicaLogDirsRequestDir) int {
			return withPartitions(d.Topics, func(t kmsg.AlterReplicaLogDirsRequestDirTopic) int { return len(t.Partitions) })
		})
	case *kmsg.DescribeProducersRequest:
		return withPartitions(req.Topics, func(t kmsg.DescribeProducersRequestTopic) int { return len(t.Partitions) })
	case *kmsg.DescribeClientQuotasRequest:
		return max(len(req.Components), 1)
	case *kmsg.AlterClientQuotasRequest:
		return len(req.Entries)
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		return max(len(req.Users), 1)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		return len(req.Deletions) + len(req.Upsertions)
	case *kmsg.DescribeTransactionsRequest:
		return len(req.TransactionalIDs)
	}
	return 1 // DescribeAcls: one filter; ListTransactions: one list
}

// withPartitions counts entries and, in each, what parts says it names.
func withPartitions[T any](entries []T, parts func(T) int) int {
	n := len(entries)
	for _, e := range entries {
		n += parts(e)
	}
	return n
}

// refusedEntry is the first entry a refused request names and its
// refusal, for the log.
type refusedEntry struct {
	name    string
	refusal *kerr.Error
}

// authorizationFailed is the refusal of a config resource: a topic's,
// or the cluster's for a broker (or other) resource.
func authorizationFailed(resource kmsg.ConfigResourceType) *kerr.Error {
	if resource == kmsg.ConfigResourceTypeTopic {
		return kerr.TopicAuthorizationFailed
	}
	return kerr.ClusterAuthorizationFailed
}

// refuseAdmin builds the answer to a refused admin request, its message
// and the first entry it named.
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
	case *kmsg.DescribeConfigsRequest, *kmsg.AlterConfigsRequest, *kmsg.IncrementalAlterConfigsRequest:
		return refuseConfigs(kreq)
	case *kmsg.DescribeACLsRequest, *kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest:
		return refuseACLs(kreq)
	case *kmsg.DeleteGroupsRequest:
		return refuseDeleteGroups(req)
	case *kmsg.OffsetDeleteRequest:
		return refuseOffsetDelete(req)
	}
	return refuseClusterAdmin(kreq)
}

// topicEntry is the first entry of a topic API: its first topic.
func topicEntry(names []string) refusedEntry {
	first := refusedEntry{refusal: kerr.TopicAuthorizationFailed}
	if len(names) > 0 {
		first.name = names[0]
	}
	return first
}

func refuseCreateTopics(req *kmsg.CreateTopicsRequest) (kmsg.Response, string, refusedEntry) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	msg := refusedAdminMessage("create topics")
	each := newEntryMessages(msg)
	var names []string
	for _, t := range req.Topics {
		names = append(names, t.Topic)
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, kerr.TopicAuthorizationFailed.Code, each.next()
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, msg, topicEntry(names)
}

// refuseDeleteTopics answers by name (v0-v5's TopicNames) or by name or
// id (v6's Topics), echoing what each named.
func refuseDeleteTopics(req *kmsg.DeleteTopicsRequest) (kmsg.Response, string, refusedEntry) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	msg := refusedAdminMessage("delete topics")
	each := newEntryMessages(msg)
	var names []string
	answer := func(name *string, id [16]byte) {
		if name != nil {
			names = append(names, *name)
		}
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode, rt.ErrorMessage = name, id, kerr.TopicAuthorizationFailed.Code, each.next()
		resp.Topics = append(resp.Topics, rt)
	}
	for i := range req.TopicNames {
		answer(&req.TopicNames[i], [16]byte{})
	}
	for _, t := range req.Topics {
		answer(t.Topic, t.TopicID)
	}
	return resp, msg, topicEntry(names)
}

func refuseCreatePartitions(req *kmsg.CreatePartitionsRequest) (kmsg.Response, string, refusedEntry) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	msg := refusedAdminMessage("add partitions")
	each := newEntryMessages(msg)
	var names []string
	for _, t := range req.Topics {
		names = append(names, t.Topic)
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, kerr.TopicAuthorizationFailed.Code, each.next()
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, msg, topicEntry(names)
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
	return resp, refusedAdminMessage("delete records"), topicEntry(names)
}

// configResource is one resource of a configs request, and where its
// answer goes.
type configResource struct {
	kind   kmsg.ConfigResourceType
	name   string
	answer func(code int16, msg *string)
}

// refuseConfigs answers each resource of a DescribeConfigs, AlterConfigs
// or IncrementalAlterConfigs request with its refusal.
func refuseConfigs(kreq kmsg.Request) (kmsg.Response, string, refusedEntry) {
	var resources []configResource
	what := "alter configs"
	resp := kreq.ResponseKind()
	switch req := kreq.(type) {
	case *kmsg.DescribeConfigsRequest:
		what = "describe configs"
		resp := resp.(*kmsg.DescribeConfigsResponse)
		resp.Resources = make([]kmsg.DescribeConfigsResponseResource, len(req.Resources))
		for i, r := range req.Resources {
			rr := &resp.Resources[i]
			rr.Default()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			resources = append(resources, configResource{r.ResourceType, r.ResourceName, func(code int16, msg *string) { rr.ErrorCode, rr.ErrorMessage = code, msg }})
		}
	case *kmsg.AlterConfigsRequest:
		resp := resp.(*kmsg.AlterConfigsResponse)
		resp.Resources = make([]kmsg.AlterConfigsResponseResource, len(req.Resources))
		for i, r := range req.Resources {
			rr := &resp.Resources[i]
			rr.Default()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			resources = append(resources, configResource{r.ResourceType, r.ResourceName, func(code int16, msg *string) { rr.ErrorCode, rr.ErrorMessage = code, msg }})
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		resp := resp.(*kmsg.IncrementalAlterConfigsResponse)
		resp.Resources = make([]kmsg.IncrementalAlterConfigsResponseResource, len(req.Resources))
		for i, r := range req.Resources {
			rr := &resp.Resources[i]
			rr.Default()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			resources = append(resources, configResource{r.ResourceType, r.ResourceName, func(code int16, msg *string) { rr.ErrorCode, rr.ErrorMessage = code, msg }})
		}
	}
	msg := refusedAdminMessage(what)
	each := newEntryMessages(msg)
	first := refusedEntry{refusal: kerr.TopicAuthorizationFailed}
	for i, r := range resources {
		refusal := authorizationFailed(r.kind)
		if i == 0 {
			first = refusedEntry{name: r.name, refusal: refusal}
		}
		r.answer(refusal.Code, each.next())
	}
	return resp, msg, first
}

// refuseACLs answers an ACL request CLUSTER_AUTHORIZATION_FAILED, as
// Kafka answers a principal without the cluster's DESCRIBE or ALTER:
// capgate's grants are its credentials and capabilities, not ACLs.
func refuseACLs(kreq kmsg.Request) (kmsg.Response, string, refusedEntry) {
	msg := "capgate's Kafka listener does not manage ACLs: Kafka's own ACLs are managed on Kafka itself, at its own bootstrap servers; " +
		"what capgate's clients may read and write are their credentials and capabilities (capgate admin client-credential, grant)"
	each := newEntryMessages(msg)
	code := kerr.ClusterAuthorizationFailed.Code
	first := refusedEntry{name: "cluster", refusal: kerr.ClusterAuthorizationFailed}
	switch req := kreq.(type) {
	case *kmsg.DescribeACLsRequest:
		resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp, msg, first
	case *kmsg.CreateACLsRequest:
		resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
		for range req.Creations {
			r := kmsg.NewCreateACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = code, each.next()
			resp.Results = append(resp.Results, r)
		}
		return resp, msg, first
	case *kmsg.DeleteACLsRequest:
		resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
		for range req.Filters {
			r := kmsg.NewDeleteACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = code, each.next()
			resp.Results = append(resp.Results, r)
		}
		return resp, msg, first
	}
	panic(fmt.Sprintf("kafkaproto: refuseACLs of %T", kreq))
}

// refuseDeleteGroups answers each group GROUP_AUTHORIZATION_FAILED:
// capgate's groups are deleted by an admin (capgate admin group delete),
// never by a client credential.
func refuseDeleteGroups(req *kmsg.DeleteGroupsRequest) (kmsg.Response, string, refusedEntry) {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	msg := "capgate's Kafka listener does not delete groups: an admin does, with capgate admin group delete GROUP"
	each := newEntryMessages(msg)
	first := refusedEntry{refusal: kerr.GroupAuthorizationFailed}
	for i, g := range req.Groups {
		if i == 0 {
			first.name = g
		}
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode, rg.ErrorMessage = g, kerr.GroupAuthorizationFailed.Code, each.next()
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, msg, first
}

// refuseOffsetDelete answers GROUP_AUTHORIZATION_FAILED (the request's
// own error and each partition's; OffsetDelete carries no message): a
// group's committed offsets move only by an admin's reset.
func refuseOffsetDelete(req *kmsg.OffsetDeleteRequest) (kmsg.Response, string, refusedEntry) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.GroupAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	msg := "capgate's Kafka listener does not delete a group's offsets: an admin resets them, with capgate admin offsets reset GROUP TOPIC"
	return resp, msg, refusedEntry{name: req.Group, refusal: kerr.GroupAuthorizationFailed}
}
