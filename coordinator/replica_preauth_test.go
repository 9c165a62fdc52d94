package coordinator_test

import "testing"

// TestReplicaFirstLargeRequestDuringAForgedFlood is
// TestFirstLargeRequestDuringAForgedFlood on a leading replica (Kafka-log
// state), whose server answers fasthttp's refusals itself (replica_http.go
// serveError): a new credential's first large join while forged tokens
// spend the header check's one budget is 429 rate_limited, then served —
// it was 413.
func TestReplicaFirstLargeRequestDuringAForgedFlood(t *testing.T) {
	const burst = 3
	topics, partitions := largeJoinTopics()
	e := newEnv(t, partitions)
	useKafkaState(t, e)
	e.cfg.AuthFailuresPerSecond, e.cfg.AuthFailureBurst = 0.001, burst // nothing refills during the test
	s := startReplicas(t, e, 1)
	firstLargeJoinDuringAFlood(t, s.harness(s.awaitLeader(t)), burst, topics)
}
