// Package kafkaproto is the gateway's Kafka listener: unmodified Kafka
// clients (kgo, KafkaJS, librdkafka/kcat) connect to it as to a Kafka
// broker, authenticate with a capgate token over SASL, and every
// partition of every Fetch and Produce is admitted by the gateway's own
// capability checks (the same ones as the HTTP API: fences, deny-list,
// revoked members, QoS, the in-flight registry a revocation cancels).
// Requests are parsed and answers built with franz-go's kmsg; record
// batches pass through untouched.
//
// One file per Kafka API, each opening with a "Behavior:" comment saying
// what it implements and where it differs from Kafka. errors.go is the
// boundary's error table (capgate code → Kafka error code).
//
// Use: New(cfg, gate, nil, log), Start, Addr, Close. The gateway
// implements Gate over its internals. A Server is safe for concurrent use;
// each connection is served by one goroutine, one request at a time.
package kafkaproto
