// Package broker is capgate's side of Kafka: raw fetches to partition
// leaders, produce with acks=all, topic metadata, offsets, mirroring of
// committed offsets into Kafka's group offsets, and an embedded Kafka for
// tests and `capgate dev`. It speaks Kafka through franz-go only.
//
// # Using it
//
//	c, err := broker.New(cfg, log) // cfg from DefaultConfig, validated
//	defer c.Close()
//	res, err := c.Fetch(ctx, broker.FetchRequest{
//		Topic: "orders", Partition: 3, Offset: 42,
//		MaxWait: 500 * time.Millisecond, Raw: true,
//	})
//
// Fetch sends one kmsg.FetchRequest (no fetch session, read_uncommitted,
// MinBytes 1, MaxWaitMillis from the request) straight to the partition
// leader known from cached metadata: one round trip. A stale leader
// (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH) or an
// unreachable broker refreshes the metadata and retries for up to
// RequestTimeout, never past ctx. Decoded fetches go through
// kgo.ProcessFetchPartition; raw fetches (Raw) return the record batches
// untouched, cut after the last whole batch, with NextOffset read from the
// batch headers. A raw answer's first batch may start below the requested
// offset (Kafka serves whole batches); whoever decodes it skips those
// records.
//
// Cancelling a fetch's ctx returns at once, even in the middle of the
// broker's long poll: the gateway relies on this to drop fetches admitted
// under a fenced epoch.
//
// Produce hands records to kgo's idempotent producer (acks=all, no linger,
// manual partitioning), which sends them to the partition leader. Topics
// and PartitionCount read metadata; Offsets asks the leader for the log
// start offset and high watermark; CommitMarkedGroupOffsets writes a
// simple (generation -1) OffsetCommit carrying an ownership marker as its
// metadata so Kafka tooling sees capgate's progress, and GroupOwner says
// whether a group name is free for that marker (no native Kafka group,
// every committed offset marked by it).
//
// StartEmbedded runs franz-go's kfake on 127.0.0.1 (optionally persisted
// in a data dir) for tests and `capgate dev`; Embedded.Cluster exposes it
// for fault injection.
//
// # Connections
//
// A Kafka broker handles the requests of one connection strictly one after
// another, so concurrent long polls sharing a connection would wait for
// each other. Every in-flight fetch therefore leases its own connection from
// a per-broker pool of at most FetchConnectionsPerBroker; each pooled
// connection is capgate's own (conn.go: dial, TLS, ApiVersions, SASL with
// franz-go's mechanisms). Metadata, ListOffsets, OffsetCommit and produce
// share one ordinary kgo client. Both take each connection's TLS from
// tlsdial.go, which follows broker.tls.ca_file on disk.
//
// # Errors
//
// Calls return a context error (errors.Is ctx.Err()), an
// *OffsetOutOfRangeError (Fetch), or a *BrokerError carrying the kerr code
// or transport error and whether it is retriable. errors.Is(err,
// ErrUnknownTopicOrPartition) and errors.Is(err, ErrBrokerUnavailable)
// classify a *BrokerError without looking inside. Calls other than Fetch
// are bounded by RequestTimeout; when that bound (not the caller's ctx)
// runs out, the error is a retriable *BrokerError wrapping
// REQUEST_TIMED_OUT. After Close, calls fail with a non-retriable
// *BrokerError. Produce also returns ErrNoRecords for an empty batch.
//
// # Concurrency
//
// Client and Embedded are safe for concurrent use. Config and the request
// and result types are plain values.
package broker
