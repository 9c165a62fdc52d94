package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"
)

// The two modes of a one-at-a-time fetch on a VM (BENCHMARKS.md §0,
// "Thirtieth pass"). Fast: the client's and the gateway's threads take
// turns on one vCPU and the other vCPU sleeps; a request and its answer
// are two wake-ups on the same vCPU. Slow: they sit on different vCPUs,
// and each request and each answer wakes a halted vCPU with an
// inter-processor interrupt (an exit to the hypervisor, and the woken
// thread comes back on a cold vCPU) — the same exchange then costs the
// gateway 4–6× the CPU (pinned, busy: /healthz 6.7 → 43 µs, a fetch
// 10 → 51). Which mode a run of requests gets is the kernel's
// choice (its wake-up placement), and it keeps it until something (an
// idle gap, another process) moves a thread. The sequential phase
// measures, per chunk of requests (one path's n requests in a round),
// the machine's inter-processor interrupts and the vCPU each side last
// ran on, and calls a chunk slow when it sent crossIPIs or more per
// request; CAPGATE_BENCH_SEQ_PLACE runs each path with both sides pinned
// to one vCPU ("packed") or to two ("spread") as well, each mode on
// purpose.

// crossIPIs is the inter-processor interrupts per request at and above
// which a chunk ran in the slow mode: in the fast mode the pair sends
// none (what other processes send shows, 0.0–0.4 a request on this VM
// busy), in the slow mode up to two (one per wake-up of a halted vCPU;
// 0.7–1.8 measured, fewer when the vCPU woken was busy anyway).
const crossIPIs = 0.5

// seqPlaceEnv adds pinned placements to the sequential phase
// (comma-separated: "packed", "spread"; "kernel" is the unpinned run,
// always first): each path runs once per placement in every round, its
// figures labelled with it. Threads stay where a placement left them
// until the kernel moves them, so the next round's unpinned chunks start
// in the last placement's mode: count the kernel's slow chunks in a run
// without it.
const seqPlaceEnv = "CAPGATE_BENCH_SEQ_PLACE"

// Placements: the kernel's choice, or both processes on one vCPU, or
// each on its own.
const (
	placeKernel = ""
	placePacked = "packed"
	placeSpread = "spread"
)

// seqPlaces is the kernel's placement, then the ones seqPlaceEnv names.
func seqPlaces(tb testing.TB) []string {
	places := []string{placeKernel}
	for p := range strings.SplitSeq(os.Getenv(seqPlaceEnv), ",") {
		switch p = strings.TrimSpace(p); p {
		case "", "kernel":
		case placePacked, placeSpread:
			if !slices.Contains(places, p) {
				places = append(places, p)
			}
		default:
			tb.Fatalf("%s=%q: want packed and/or spread", seqPlaceEnv, os.Getenv(seqPlaceEnv))
		}
	}
	return places
}

// placeLabel is how a placement is named beside a path ("" unpinned).
func placeLabel(place string) string {
	if place == placeKernel {
		return ""
	}
	return " @" + place
}

// chunkFigure is what one chunk of a path's one-at-a-time requests cost
// and how the kernel ran it.
type chunkFigure struct {
	Position int // its place in its round's order of paths, from 0
	Fetches  int
	P50      float64 // µs
	CPU      float64 // the gateway's CPU per request, µs
	IPIs     float64 // the machine's inter-processor interrupts per request
	// GatewayVCPU and ClientVCPU are the vCPUs the gateway's and this
	// process's busiest threads of the chunk last ran on (-1: unknown).
	GatewayVCPU, ClientVCPU int
}

// Slow reports a chunk run in the slow mode (crossIPIs).
func (c chunkFigure) Slow() bool { return c.IPIs >= crossIPIs }

// SameVCPU reports a chunk whose two busiest threads ended on one vCPU.
func (c chunkFigure) SameVCPU() bool { return c.GatewayVCPU >= 0 && c.GatewayVCPU == c.ClientVCPU }

// modeFigure sums chunks by mode: how many were slow and how many ended
// on one vCPU, and the CPU per request of the fast and of the slow ones
// (their requests weighed alike).
type modeFigure struct {
	Chunks, Slow, SameVCPU int
	FastCPU, SlowCPU       float64 // µs per request; 0 with no such chunk
	IPIs                   float64 // per request over all chunks
}

func modes(cs []chunkFigure) modeFigure {
	var m modeFigure
	var fastN, slowN, n int
	for _, c := range cs {
		m.Chunks++
		n += c.Fetches
		m.IPIs += c.IPIs * float64(c.Fetches)
		if c.SameVCPU() {
			m.SameVCPU++
		}
		if c.Slow() {
			m.Slow++
			slowN += c.Fetches
			m.SlowCPU += c.CPU * float64(c.Fetches)
		} else {
			fastN += c.Fetches
			m.FastCPU += c.CPU * float64(c.Fetches)
		}
	}
	if fastN > 0 {
		m.FastCPU /= float64(fastN)
	}
	if slowN > 0 {
		m.SlowCPU /= float64(slowN)
	}
	if n > 0 {
		m.IPIs /= float64(n)
	}
	return m
}

// ipiCount is the machine's inter-processor interrupts so far, summed
// over its CPUs: rescheduling (RES) and function-call (CAL) interrupts of
// /proc/interrupts, the two a wake-up of a task on another CPU sends.
func ipiCount() (uint64, error) {
	b, err := os.ReadFile("/proc/interrupts")
	if err != nil {
		return 0, err
	}
	return parseIPIs(b)
}

// parseIPIs sums the per-CPU counts of the RES and CAL lines of a
// /proc/interrupts text (the header's CPU columns say how many counts).
func parseIPIs(b []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	cpus, lines := -1, 0
	var total uint64
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if cpus < 0 {
			cpus = len(fields) // the header: CPU0 CPU1 …
			continue
		}
		if fields == nil || (fields[0] != "RES:" && fields[0] != "CAL:") {
			continue
		}
		if len(fields) < cpus+1 {
			return 0, fmt.Errorf("/proc/interrupts: %s has %d counts for %d CPUs", fields[0], len(fields)-1, cpus)
		}
		for _, f := range fields[1 : cpus+1] {
			n, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/interrupts: %s: %w", fields[0], err)
			}
			total += n
		}
		lines++
	}
	if lines != 2 {
		return 0, fmt.Errorf("/proc/interrupts: %d of the RES and CAL lines", lines)
	}
	return total, nil
}

// threadStat is one thread's CPU time (ns) so far and the vCPU it last
// ran on.
type threadStat struct {
	CPU  int64
	VCPU int
}

// threadStats is every thread of pid, by thread id: CPU time from
// schedstat, the vCPU it last ran on from stat (field 39, "processor").
func threadStats(pid int) (map[string]threadStat, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[string]threadStat, len(tasks))
	for _, task := range tasks {
		sched, err1 := os.ReadFile(filepath.Join(dir, task.Name(), "schedstat"))
		stat, err2 := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err1 != nil || err2 != nil {
			continue // the thread just ended
		}
		t := threadStat{VCPU: -1}
		first, _, _ := strings.Cut(string(sched), " ")
		t.CPU, _ = strconv.ParseInt(first, 10, 64)
		if _, rest, ok := strings.Cut(string(stat), ") "); ok {
			// rest starts at field 3 (state): processor, field 39, is its 37th.
			if f := strings.Fields(rest); len(f) >= 37 {
				if v, err := strconv.Atoi(f[36]); err == nil {
					t.VCPU = v
				}
			}
		}
		out[task.Name()] = t
	}
	return out, nil
}

// busiestVCPU is the vCPU that the thread which ran longest between
// before and after last ran on (-1 when none ran).
func busiestVCPU(before, after map[string]threadStat) int {
	vcpu, most := -1, int64(0)
	for _, tid := range slices.Sorted(maps.Keys(after)) {
		a := after[tid]
		if d := a.CPU - before[tid].CPU; d > most {
			vcpu, most = a.VCPU, d
		}
	}
	return vcpu
}

// cpuMask is a CPU affinity mask (bit i: CPU i), as sched_setaffinity
// takes it.
type cpuMask [16]uint64

func (m *cpuMask) set(cpu int) { m[cpu/64] |= 1 << (cpu % 64) }

// cpus lists the CPUs of m.
func (m *cpuMask) cpus() []int {
	var out []int
	for i := range len(m) * 64 {
		if m[i/64]&(1<<(i%64)) != 0 {
			out = append(out, i)
		}
	}
	return out
}

// startAffinity is this process's CPU affinity when the benchmark
// started: the kernel's placement gives both processes all of it back.
var startAffinity = sync.OnceValues(func() (cpuMask, error) {
	var m cpuMask
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m)))
	if errno != 0 {
		return m, fmt.Errorf("sched_getaffinity: %w", errno)
	}
	return m, nil
})

// pin sets the CPU affinity of every thread of pid to mask; threads
// started later inherit it from theirs.
func pin(pid int, mask cpuMask) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask)))
		if errno != 0 && errno != syscall.ESRCH { // ESRCH: the thread just ended
			return fmt.Errorf("sched_setaffinity %d/%d: %w", pid, tid, errno)
		}
	}
	return nil
}

// placeMasks are the affinities of the gateway and of this process for
// a placement, from the CPUs this process started with: packed both on
// the first, spread the gateway on the second and this process on the
// first, the kernel's choice all of them for both.
func placeMasks(place string) (gateway, client cpuMask, err error) {
	all, err := startAffinity()
	if err != nil {
		return all, all, err
	}
	cpus := all.cpus()
	var first, second cpuMask
	first.set(cpus[0])
	switch place {
	case placePacked:
		return first, first, nil
	case placeSpread:
		if len(cpus) < 2 {
			return all, all, fmt.Errorf("placement spread: this process may run on CPU %d only", cpus[0])
		}
		second.set(cpus[1])
		return second, first, nil
	}
	return all, all, nil
}
