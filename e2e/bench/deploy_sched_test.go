package bench

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// A /proc/interrupts of this session's VM, shortened: the header names
// the CPUs, and each line has a count per CPU, then a description.
const interruptsSample = `            CPU0       CPU1       
   0:         41          0   IO-APIC    2-edge      timer
 NMI:          0          0   Non-maskable interrupts
 LOC:   17603244   18712102   Local timer interrupts
 RES:    3274374    3194778   Rescheduling interrupts
 CAL:    4112627    3977352   Function call interrupts
 TLB:    2388430    2391228   TLB shootdowns
 ERR:          0
 MIS:          0
`

func TestParseIPIs(t *testing.T) {
	got, err := parseIPIs([]byte(interruptsSample))
	if want := uint64(3274374 + 3194778 + 4112627 + 3977352); err != nil || got != want {
		t.Errorf("parseIPIs = %d, %v; want %d (RES and CAL, both CPUs)", got, err, want)
	}
	// A line short of counts, or none of the two lines, is an error,
	// never a count of 0 that would call every chunk fast.
	short := strings.Replace(interruptsSample, "3194778   Rescheduling", "", 1)
	if n, err := parseIPIs([]byte(short)); err == nil {
		t.Errorf("RES with one count for two CPUs: %d, no error", n)
	}
	none := strings.Replace(strings.Replace(interruptsSample, "RES:", "XRS:", 1), "CAL:", "XCL:", 1)
	if n, err := parseIPIs([]byte(none)); err == nil {
		t.Errorf("no RES or CAL line: %d, no error", n)
	}
	// The machine's own, read twice: counts only grow.
	a, err := ipiCount()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := ipiCount(); err != nil || b < a {
		t.Errorf("ipiCount: %d then %d, %v", a, b, err)
	}
}

func TestModes(t *testing.T) {
	cs := []chunkFigure{
		{Fetches: 1000, CPU: 10, IPIs: 0.02, GatewayVCPU: 0, ClientVCPU: 0},
		{Fetches: 1000, CPU: 40, IPIs: 1.9, GatewayVCPU: 1, ClientVCPU: 0},
		{Fetches: 3000, CPU: 12, IPIs: crossIPIs - 0.01, GatewayVCPU: 1, ClientVCPU: 1},
		{Fetches: 1000, CPU: 30, IPIs: crossIPIs, GatewayVCPU: -1, ClientVCPU: -1},
	}
	m := modes(cs)
	want := modeFigure{Chunks: 4, Slow: 2, SameVCPU: 2, FastCPU: (10*1000 + 12*3000) / 4000.0, SlowCPU: (40 + 30) / 2.0,
		IPIs: (0.02*1000 + 1.9*1000 + (crossIPIs-0.01)*3000 + crossIPIs*1000) / 6000}
	if !near(m.FastCPU, want.FastCPU) || !near(m.SlowCPU, want.SlowCPU) || !near(m.IPIs, want.IPIs) ||
		m.Chunks != want.Chunks || m.Slow != want.Slow || m.SameVCPU != want.SameVCPU {
		t.Errorf("modes = %+v, want %+v", m, want)
	}
	if m := modes(cs[:1]); m.SlowCPU != 0 || m.Slow != 0 {
		t.Errorf("no slow chunk: %+v", m)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestThreadVCPU pins this process to each of its CPUs in turn, keeps one
// thread busy there, and checks that threadStats and busiestVCPU name
// that CPU (the "processor" field of /proc/<pid>/task/<tid>/stat).
func TestThreadVCPU(t *testing.T) {
	all, err := startAffinity()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := pin(os.Getpid(), all); err != nil {
			t.Error(err)
		}
	}()
	cpus := all.cpus()
	for _, cpu := range cpus[:min(len(cpus), 2)] {
		var m cpuMask
		m.set(cpu)
		if err := pin(os.Getpid(), m); err != nil {
			t.Fatal(err)
		}
		before, err := threadStats(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		spin()
		after, err := threadStats(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if got := busiestVCPU(before, after); got != cpu {
			t.Errorf("pinned to CPU %d, the busiest thread last ran on %d", cpu, got)
		}
	}
}

// spin keeps a thread busy for a few milliseconds of CPU.
func spin() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	x := 1
	for i := range 20_000_000 {
		x = x*31 + i
	}
	sink = x
}

var sink int
