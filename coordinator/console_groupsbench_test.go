package coordinator_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
)

// BenchmarkConsoleGroupsPage: one re-read of the console's groups page
// (every 5 s while it is open) with 100 groups of 1,000 partitions each,
// one member apiece: the coordinator's CPU per re-read (the process's,
// user + system: the page, the admin reads it makes and the test's
// client) and the admin API bytes the console reads for it. Before, the
// page described each group whole: 1.19 s and 639 ms of CPU a re-read,
// 18.3 MB of describes (a loaded 2-core machine); with the groups'
// summaries 52–59 ms, 52–58 ms of CPU, 23 KB.
func BenchmarkConsoleGroupsPage(b *testing.B) {
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
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
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
