package api

// TopicProduceResponse answers POST /v1/topics/{topic}/records: where the
// gateway placed the records (Kafka's default partitioner), one entry per
// partition written, in partition order.
type TopicProduceResponse struct {
	Count      int                 `json:"count"`
	Partitions []PartitionProduced `json:"partitions"`
}

// PartitionProduced is one partition's share of a topic produce: its
// records, in request order, at offsets base_offset..last_offset (no
// other record between them unless another producer wrote to the
// partition at the same moment and the share spanned several batches).
type PartitionProduced struct {
	Partition  int32 `json:"partition"`
	BaseOffset int64 `json:"base_offset"`
	LastOffset int64 `json:"last_offset"`
	Count      int   `json:"count"`
}
