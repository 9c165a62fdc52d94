package coordinator_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// BenchmarkConsoleGroupsPage: one re-read of the console's groups page
// (every 5 s while it is open) with 100 groups of 1,000 partitions each,
// one member apiece: the coordinator's CPU per re-read (the process's,
// user + system: the page, the admin reads it makes and the test's
// client) and the admin API bytes the console reads for it. Before, the
// page described each group whole: 1.19 s and 639 ms of CPU a re-read,
// 18.3 MB of describes (a loaded 2-core machine); with the groups'
// summaries 52–59 ms, 52–58 ms of CPU, 23 KB; with the one list of
// summaries (GET /v1/admin/groups?summaries=true) 17.5 ms of CPU
// (BENCHMARKS.md §15; BenchmarkGroupSummaries has the same-run ratio).
func BenchmarkConsoleGroupsPage(b *testing.B) {
	e, h, names := groupsOfOrders(b)
	describeBytes, summaryBytes := 0, 0
	for _, g := range names {
		_, body, _ := h.do(b, "GET", "/v1/admin/groups/"+g, e.adminToken, nil)
		describeBytes += len(body)
		_, body, _ = h.do(b, "GET", "/v1/admin/groups/"+g+"/summary", e.adminToken, nil)
		summaryBytes += len(body)
	}
	c := newConsoleClient(b, h)
	if a := c.login(e.adminToken, nil); a.status != 303 {
		b.Fatalf("console login: %d", a.status)
	}
	pageBytes := 0
	read := func() {
		page := c.send("GET", "/console/groups", nil, nil)
		if page.status != 200 {
			b.Fatalf("groups page: %d", page.status)
		}
		pageBytes = len(page.body)
	}
	read() // warm: the log-end cache, connections
	b.ResetTimer()
	start := cpu()
	for b.Loop() {
		read()
	}
	b.ReportMetric(float64(cpu()-start)/float64(b.N)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(describeBytes), "describe-bytes") // what it read before: each group described
	b.ReportMetric(float64(summaryBytes), "summary-bytes")   // what it reads: each group's summary
	b.ReportMetric(float64(pageBytes), "page-bytes")
}

// groupsOfOrders is 100 groups of one member each, reading the 1,000
// partitions of orders.
func groupsOfOrders(b *testing.B) (*env, *harness, []string) {
	const groups, partitions = 100, 1000
	e := newBenchEnv(b, map[string]int32{"orders": partitions})
	e.cfg.Groups.Limits.StateBytesPerTenant = e.cfg.Groups.Limits.StateBytes // one credential joins them all
	h := e.start(b)
	names := make([]string, groups)
	for i := range names {
		names[i] = fmt.Sprintf("g%03d", i)
	}
	creds := h.clientCredential(b, names, []string{"orders"})
	for _, g := range names {
		h.join(b, g, creds, api.JoinRequest{ClientID: "c", Topics: []string{"orders"}, SessionTimeoutMs: 300_000})
	}
	return e, h, names
}

// cpu is the process's CPU time so far (user + system).
func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGroupSummaries: the summaries of 100 groups of 1,000
// partitions (the groups page's, and `capgate admin groups`'s), read
// as a list and each group's summary in turn ("each": what both did
// before, 101 admin calls, each summing its group's lag over the
// offset cache) beside one list with its summaries ("listed": GET
// /v1/admin/groups?summaries=true, one loop read, one log-end lookup
// per distinct partition), in the same run: the coordinator's CPU per
// read.
func BenchmarkGroupSummaries(b *testing.B) {
	e, h, names := groupsOfOrders(b)
	reads := map[string]func(){
		"each": func() {
			h.call(b, "GET", "/v1/admin/groups", e.adminToken, nil, 200, nil)
			for _, g := range names {
				h.call(b, "GET", "/v1/admin/groups/"+g+"/summary", e.adminToken, nil, 200, nil)
			}
		},
		"listed": func() {
			var list coordinator.GroupsResponse
			h.call(b, "GET", "/v1/admin/groups?summaries=true&limit=100", e.adminToken, nil, 200, &list)
			if len(list.Summaries) != len(names) || list.Summaries[0].Lag == nil {
				b.Fatalf("listed: %d summaries, the first's lag %v", len(list.Summaries), list.Summaries[0].Lag)
			}
		},
	}
	for _, name := range []string{"each", "listed"} {
		b.Run(name, func(b *testing.B) {
			reads[name]() // warm: the log-end cache, connections
			b.ResetTimer()
			start := cpu()
			for b.Loop() {
				reads[name]()
			}
			b.ReportMetric(float64(cpu()-start)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}
