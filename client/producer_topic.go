package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/capgate/capgate/api"
)

// PartitionProduced is where ProduceTopic wrote one partition's share of
// its records: Count records, in the order given, at offsets BaseOffset
// to LastOffset.
type PartitionProduced struct {
	Partition  int32
	BaseOffset int64
	LastOffset int64
	Count      int
}

// topicRecord is a record of a topic produce on the wire: a non-nil
// empty key is sent ("key": "", a key Kafka hashes), not left out as
// api.ProduceRecord leaves it (no key: the request's one partition).
type topicRecord struct {
	Key     *[]byte      `json:"key,omitempty"`
	Value   []byte       `json:"value"`
	Headers []api.Header `json:"headers,omitempty"`
}

// ProduceTopic appends records (Key, Value, Headers) to topic without
// choosing partitions: the gateway places each record as Kafka's default
// partitioner does over the topic's current partition count — a record
// with a Key (an empty non-nil one too) on murmur2(key) modulo the
// count, where Java and franz-go producers put it; records with a nil
// Key all on one partition, a random one per call (Kafka's sticky
// partitioner, KIP-480: the call is the batch). It
// needs a credential producer (NewCredentialProducer; a capability is
// refused 403 — produce to its partition with Produce) and returns each
// partition written, in partition order. Records of one partition keep
// their order. Use a Partitioner and Produce to choose partitions
// yourself.
//
// Retries, limits and errors are Produce's. Kafka writes no batch across
// partitions atomically: when one partition's write fails, ProduceTopic
// returns that *Error and other partitions may have been written — its
// Details["partitions"] lists every partition of the call, "written" true
// (with "base_offset", "last_offset") or false (with "error"); do not
// send the same records again blindly.
func (p *Producer) ProduceTopic(ctx context.Context, topic string, records []Record) ([]PartitionProduced, error) {
	req := struct {
		Records []topicRecord `json:"records"`
	}{Records: make([]topicRecord, len(records))}
	for i, r := range records {
		req.Records[i] = topicRecord{Value: r.Value, Headers: r.Headers}
		if r.Key != nil {
			req.Records[i].Key = &records[i].Key
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("client: produce %s: encode: %w", topic, err)
	}
	var resp api.TopicProduceResponse
	path := func(base string) string { return base + "/v1/topics/" + url.PathEscape(topic) + "/records" }
	if err := p.post(ctx, "produce "+topic, path, body, &resp); err != nil {
		return nil, err
	}
	out := make([]PartitionProduced, len(resp.Partitions))
	for i, pp := range resp.Partitions {
		out[i] = PartitionProduced{Partition: pp.Partition, BaseOffset: pp.BaseOffset, LastOffset: pp.LastOffset, Count: pp.Count}
	}
	return out, nil
}
