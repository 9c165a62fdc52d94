package main

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/client"
)

// TestPartitionerIsKafkas: keyed records go where the Java client puts
// them — (murmur2(key) & 0x7fffffff) % n, with the murmur2 values of
// Kafka's own UtilsTest — and records without a key round-robin.
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
		p := newPartitioner("demo", n)
		for key, hash := range murmur2 {
			want := int32(uint32(hash)&0x7fffffff) % n
			if got := p.partition(&client.Record{Key: []byte(key)}); got != want {
				t.Errorf("%d partitions: key %q went to %d, Kafka puts it on %d", n, key, got, want)
			}
		}
		for i := range 2 * n {
			if got := p.partition(&client.Record{Value: []byte("v")}); got != i%n {
				t.Fatalf("%d partitions: record %d without a key went to %d, want %d (round-robin)", n, i, got, i%n)
			}
		}
	}
}

// TestProduceShortFlagsDoNotClash: kcat's -k (a record key) is no
// shorthand here, since --key is the TLS client key: `produce -k x` is a
// usage error (exit 2), never a record key; -o takes text or json only.
func TestProduceShortFlagsDoNotClash(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"produce", "-t", "demo", "-k", "x"}, "unknown shorthand flag: 'k'"},
		{[]string{"produce", "-t", "demo", "-o", "table", "--capability", "c", "-p", "0"}, "--output: want text or json"},
	} {
		_, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.says) || exitCode(err) != exitUsage {
			t.Errorf("capgate %s: %v (exit %d), want a usage error saying %q", strings.Join(c.args, " "), err, exitCode(err), c.says)
		}
	}
}
