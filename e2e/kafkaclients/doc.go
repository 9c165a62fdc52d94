// Package kafkaclients tests the gateway's Kafka listener
// (gateway/kafkaproto) with real Kafka clients nobody here wrote —
// franz-go's kgo, KafkaJS from npm (testdata/kafkajs), and kcat — against
// kfake behind real gateways and a real coordinator, over loopback
// sockets. stack.go starts the deployment; the benchmarks in this package
// compare kgo through the listener with kgo straight to kfake.
package kafkaclients
