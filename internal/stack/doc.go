// Package stack builds capgate deployments on loopback, every part real:
// franz-go's kfake with N brokers, the coordinator(s) and the gateways,
// each in this process or as a `capgate` process, plus SDK consumers and
// producers with one poll loop and one produce loop. It is the one
// builder behind `capgate dev` (and its --demo), the end-to-end suites
// (e2e/harness, e2e/sdk, e2e/faults, e2e/cli) and the benchmarks
// (e2e/bench): they differ in options, never in how a part is started,
// configured, probed or stopped.
//
//	s, err := stack.Start(ctx, stack.Options{Dir: dir, Topics: map[string]int32{"orders": 6},
//		Gateways: 2, Timing: stack.TestTiming()})
//	defer s.Close()
//	cred, _ := s.ClientCredential(ctx, "svc", []string{"g"}, []string{"orders"}, time.Hour)
//	p := s.StartProducer(stack.ProducerOptions{Topic: "orders", Partitions: 6})
//	c, _ := stack.StartConsumer(ctx, stack.ConsumerOptions{Config: s.ClientConfig("g", []string{"orders"}, cred)})
//	s.Coordinator().Kill(); s.Coordinator().Start(ctx)  // same address, same data directory
//
// Options leave room for what comes next without a second builder:
// Coordinators > 1 (replicas on the Kafka-log store, issue #11) and TLS
// listeners (Scheme "https", an HTTP client trusting the test CA, and the
// Coordinator/Gateway config hooks, issue #14). Process parts write their
// config file into Dir and log JSON lines to Options.OnLine.
//
// No part of this package imports testing: errors are returned, and the
// test suites wrap them (e2e/harness adds t.Fatal, t.Cleanup, the event
// log and the fault injectors). Everything is safe for concurrent use.
package stack
