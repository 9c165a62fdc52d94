package kafkaproto

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// BenchmarkForwardHop measures what one more hop costs a byte on this
// machine's loopback, the listener's situation (Kafka → gateway →
// client): a source writes 1 MiB chunks, a sink reads them, and between
// them nothing ("direct"), read and write through a 1 MiB user buffer
// ("copy": what the listener does — read Kafka's answer, writev it to the
// client), the same through 128 KiB ("copy-128KiB": cut-through in
// small, cache-hot pieces), whole frames of 4 MiB or 1 MiB read into
// three buffers in rotation and each written two frames later
// ("frames-*": the read-ahead's pattern, the buffer cold by then), or
// splice(2) through a pipe ("splice": Go's TCPConn.ReadFrom, the
// zero-copy alternative). It reports the whole process's CPU per GiB and
// GiB/s.
//
//	go test -run '^$' -bench ForwardHop -benchtime 4x ./gateway/kafkaproto/
//
// BENCHMARKS.md §8 has the figures: splice cost more CPU than copying on
// this kernel (6.18, loopback), which is why the listener copies.
func BenchmarkForwardHop(b *testing.B) {
	const total = 1 << 30
	for _, mode := range []string{"direct", "copy", "copy-128KiB", "frames-4MiB", "frames-1MiB", "splice"} {
		b.Run(mode, func(b *testing.B) {
			var cpu time.Duration
			start := time.Now()
			for range b.N {
				cpu += forwardHop(b, mode, total)
			}
			secs := time.Since(start).Seconds()
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/GiB")
			b.ReportMetric(float64(b.N)/secs, "GiB/s")
		})
	}
}

// forwardHop moves total bytes source → (hop) → sink and returns the
// process CPU it took.
func forwardHop(b *testing.B, mode string, total int64) time.Duration {
	srcW, srcR := tcpPair(b)
	dstW, dstR := tcpPair(b)
	defer srcR.Close()
	defer dstR.Close()
	chunk := make([]byte, 1<<20)
	go func() {
		defer srcW.Close()
		for n := int64(0); n < total; n += int64(len(chunk)) {
			if _, err := srcW.Write(chunk); err != nil {
				return
			}
		}
	}()
	sink := srcR // direct: the sink reads the source
	if mode != "direct" {
		sink = dstR
	}
	done := make(chan int64)
	go func() {
		n, _ := io.CopyBuffer(io.Discard, readerOnly{sink}, make([]byte, 1<<20))
		done <- n
	}()
	cpu0 := processCPU()
	switch mode {
	case "copy":
		_, _ = io.CopyBuffer(writerOnly{dstW}, readerOnly{srcR}, make([]byte, 1<<20))
	case "copy-128KiB":
		_, _ = io.CopyBuffer(writerOnly{dstW}, readerOnly{srcR}, make([]byte, 128<<10))
	case "frames-4MiB", "frames-1MiB":
		size := 4 << 20
		if mode == "frames-1MiB" {
			size = 1 << 20
		}
		// whole frames read into three buffers in rotation, each written
		// out two frames after it was read (the read-ahead's pattern)
		bufs := [][]byte{make([]byte, size), make([]byte, size), make([]byte, size)}
		i := 0
		for ; ; i++ {
			if _, err := io.ReadFull(srcR, bufs[i%3]); err != nil {
				break
			}
			if i >= 2 {
				_, _ = dstW.Write(bufs[(i-2)%3])
			}
		}
		for j := max(i-2, 0); j < i; j++ {
			_, _ = dstW.Write(bufs[j%3])
		}
	case "splice":
		_, _ = dstW.(*net.TCPConn).ReadFrom(srcR) // splice(2) on Linux
	}
	dstW.Close()
	if n := <-done; n != total {
		b.Fatalf("%s: the sink read %d of %d bytes", mode, n, total)
	}
	return processCPU() - cpu0
}

// readerOnly and writerOnly hide ReadFrom/WriteTo: io.Copy would splice.
type readerOnly struct{ io.Reader }
type writerOnly struct{ io.Writer }

func tcpPair(b *testing.B) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		b.Fatal("accept failed")
	}
	return c, s
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
