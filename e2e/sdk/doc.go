// Package sdk is the end-to-end suite of the Go consumer SDK (package
// client) against real parts over real HTTP: a kfake broker, a
// coordinator with its badger store in a temporary directory, and
// gateways, each on a 127.0.0.1:0 listener. No test doubles.
//
// The harness is exported so that other end-to-end suites (fault tests)
// can reuse it:
//
//	c := sdk.StartCluster(t, sdk.ClusterOptions{Partitions: 12, Gateways: 2})
//	load := c.StartLoad(t, sdk.LoadOptions{Interval: 5 * time.Millisecond})
//	a := c.NewMember(t, sdk.MemberOptions{Name: "a", Group: "g"})
//	...
//	load.Stop()
//	end := c.LogEnd(t)                       // Kafka is the ground truth
//	ledger := sdk.WaitDelivered(t, 20*time.Second, end, a, b)
//	ledger.ExactlyOnce(t, end)
//	ledger.Exclusive(t, c.Partitions)
//
// StartCluster builds the cluster (stopped by t.Cleanup); NewMember joins
// a consumer whose poll loop records every delivery, hook call and
// confirmed commit with timestamps, through a Transport that records
// every fetch on the wire and can be killed (Member.Kill: the member goes
// silent without leaving). StartLoad writes uniquely numbered records to
// every partition, straight to Kafka or through the gateways. A Ledger
// merges deliveries and checks them: exactly once, at least once with the
// duplicates, exclusivity in time, gaps. Eventually is the only way the
// suite waits: a poll with a generous deadline, never a fixed sleep.
//
// Set CAPGATE_E2E_LOG=debug (or info, warn) to see every part's logs.
//
// Every type is safe for concurrent use unless its documentation says
// otherwise.
package sdk
