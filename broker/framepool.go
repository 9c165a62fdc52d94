package broker

import (
	"math/bits"
	"sync"
)

// Buffers for large broker answers, recycled. A gateway streaming 1 MiB
// fetches allocated (and zeroed) a megabyte per fetch; with the small live
// heap of a gateway, the garbage collector then ran every few fetches and
// cost more than the copy it saves to reuse them (BENCHMARKS.md §0). An
// answer's buffer goes back to the pool when its reader says it is done
// with it (FetchResult.Release); one never released is simply collected.

const (
	framePoolMin     = 64 << 10 // smaller answers are allocated as before
	framePoolClasses = 13       // 64 KiB .. 256 MiB, powers of two
)

var framePools [framePoolClasses]sync.Pool

// frameClass is the pool of buffers of at least size bytes, -1 when size
// is not pooled.
func frameClass(size int) int {
	if size < framePoolMin {
		return -1
	}
	c := bits.Len(uint(size-1)) - bits.Len(uint(framePoolMin-1))
	if c >= framePoolClasses {
		return -1
	}
	return c
}

// getFrame returns a buffer of size bytes, pooled when large (its
// contents are whatever was there: it is read into whole).
func getFrame(size int) *[]byte {
	c := frameClass(size)
	if c < 0 {
		b := make([]byte, size)
		return &b
	}
	if p, _ := framePools[c].Get().(*[]byte); p != nil {
		*p = (*p)[:size]
		return p
	}
	b := make([]byte, size, framePoolMin<<c)
	return &b
}

// putFrame returns a buffer from getFrame; nobody may use it afterwards.
func putFrame(p *[]byte) {
	if p == nil {
		return
	}
	if c := frameClass(cap(*p)); c >= 0 && cap(*p) == framePoolMin<<c {
		framePools[c].Put(p)
	}
}
