package client

import "testing"

// TestPartitionerIsKafkas: keyed records go where the Java client puts
// them — (murmur2(key) & 0x7fffffff) % n, with the murmur2 values of
// Kafka's own UtilsTest — and records without a key round-robin.
// (capgate produce's partitioner, moved here for SDK producers.)
func TestPartitionerIsKafkas(t *testing.T) {
	murmur2 := map[string]int32{ // Kafka's UtilsTest.testMurmur2
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	for _, n := range []int32{1, 3, 12, 100} {
		p, err := NewPartitioner(n)
		if err != nil {
			t.Fatal(err)
		}
		for key, hash := range murmur2 {
			want := int32(uint32(hash)&0x7fffffff) % n
			if got := p.Partition([]byte(key)); got != want {
				t.Errorf("%d partitions: key %q went to %d, Kafka puts it on %d", n, key, got, want)
			}
		}
		for i := range 2 * n {
			if got := p.Partition(nil); got != i%n {
				t.Fatalf("%d partitions: record %d without a key went to %d, want %d (round-robin)", n, i, got, i%n)
			}
		}
	}
	if _, err := NewPartitioner(0); err == nil {
		t.Fatal("a partitioner over 0 partitions was built")
	}
}
