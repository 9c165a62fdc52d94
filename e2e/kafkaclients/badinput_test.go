package kafkaclients

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/e2e/sdk"
)

// TestBadInputOnTheListener sends the listener what no client library
// would. Each attack is refused or its connection closed, a kgo consumer
// on the same gateway keeps consuming throughout, and once every client
// is gone no connection or in-flight fetch is left.
func TestBadInputOnTheListener(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	addr := s.KafkaAddrs()[0]
	grant := s.Grant(t, "orders", 1, []string{"fetch"}, time.Minute)
	produceDirect(t, s, "orders", 1, 5)
	healthy := kgoClient(t, s.KafkaAddrs(), grant.Capability, false,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"orders": {1: kgo.NewOffset().AtStart()}}))
	pollN(t, healthy, 5)

	const readTimeout, slack = 2 * time.Second, 3 * time.Second // the stack's kafka read timeout
	t.Run("truncated frame", func(t *testing.T) {
		r := dialRaw(t, addr)
		r.nc.Write(frameHeader(100)) // promises 100 bytes
		r.nc.Write(make([]byte, 10)) // sends 10
		if !r.closedBy(readTimeout + slack) {
			t.Fatal("a truncated frame was not closed within read_timeout")
		}
	})
	t.Run("oversize frame before SASL", func(t *testing.T) {
		r := dialRaw(t, addr)
		r.nc.Write(frameHeader(1 << 20))
		if !r.closedBy(time.Second) {
			t.Fatal("a 1 MiB frame before SASL was not closed at once")
		}
	})
	t.Run("oversize frame after SASL", func(t *testing.T) {
		r := dialRaw(t, addr)
		if resp := r.authenticate("OAUTHBEARER", grant.Capability); resp.ErrorCode != 0 {
			t.Fatalf("authenticate: %d", resp.ErrorCode)
		}
		r.nc.Write(frameHeader(9 << 20)) // kafka_max_request_bytes is 8 MiB
		if !r.closedBy(time.Second) {
			t.Fatal("a 9 MiB frame was not closed at once")
		}
	})
	t.Run("unknown api key", func(t *testing.T) {
		r := dialRaw(t, addr)
		r.nc.Write(append(frameHeader(10), 0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff)) // key 999 v0
		if !r.closedBy(time.Second) {
			t.Fatal("an unknown api key was not closed")
		}
	})
	t.Run("unknown version", func(t *testing.T) {
		r := dialRaw(t, addr)
		av := kmsg.NewPtrApiVersionsRequest()
		av.SetVersion(99)
		r.send(av)
		resp := kmsg.NewPtrApiVersionsResponse() // answered in the v0 format
		if err := r.recv(resp); err != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
			t.Fatalf("ApiVersions v99: err %v code %d keys %d, want UNSUPPORTED_VERSION with the table", err, resp.ErrorCode, len(resp.ApiKeys))
		}
		meta := kmsg.NewPtrMetadataRequest()
		meta.SetVersion(99)
		r.send(meta)
		if !r.closedBy(time.Second) {
			t.Fatal("Metadata v99 was not closed")
		}
	})
	t.Run("request before SASL", func(t *testing.T) {
		r := dialRaw(t, addr)
		r.send(fetchOne("orders", 1, 0, 0))
		if !r.closedBy(time.Second) {
			t.Fatal("a Fetch before SASL was not closed")
		}
	})
	t.Run("authenticate without handshake", func(t *testing.T) {
		r := dialRaw(t, addr)
		r.send(authRequest("PLAIN", grant.Capability))
		if !r.closedBy(time.Second) {
			t.Fatal("SaslAuthenticate without SaslHandshake was not closed")
		}
	})
	t.Run("SASL replay", func(t *testing.T) {
		r := dialRaw(t, addr)
		r.authenticate("PLAIN", grant.Capability)
		r.send(authRequest("PLAIN", grant.Capability))
		if !r.closedBy(time.Second) {
			t.Fatal("a replayed SaslAuthenticate was not closed")
		}
	})
	t.Run("bad token", func(t *testing.T) {
		r := dialRaw(t, addr)
		forged := grant.Capability[:len(grant.Capability)-4] + "AAAA"
		if resp := r.authenticate("OAUTHBEARER", forged); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("forged token: error %d, want SASL_AUTHENTICATION_FAILED", resp.ErrorCode)
		}
		if !r.closedBy(time.Second) {
			t.Fatal("a failed authentication did not close the connection")
		}
	})
	t.Run("re-authentication as another identity", func(t *testing.T) {
		other := s.Grant(t, "orders", 2, []string{"fetch"}, time.Minute)
		r := dialRaw(t, addr)
		r.authenticate("OAUTHBEARER", grant.Capability)
		if resp := r.authenticate("OAUTHBEARER", other.Capability); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("re-authentication with another partition's capability: error %d", resp.ErrorCode)
		}
		if !r.closedBy(time.Second) {
			t.Fatal("a re-authentication as another identity did not close the connection")
		}
	})
	t.Run("fetch not covered", func(t *testing.T) {
		produceDirect(t, s, "orders", 2, 3)
		r := dialRaw(t, addr)
		r.authenticate("OAUTHBEARER", grant.Capability)
		resp := r.roundTrip(fetchOne("orders", 2, 0, 0)).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(p.RecordBatches) != 0 {
			t.Fatalf("partition 2 with a capability for 1: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
		}
		resp = r.roundTrip(fetchOne("orders", 1, 0, 0)).(*kmsg.FetchResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
			t.Fatalf("partition 1 on the same connection: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
		}
	})
	t.Run("refused admin request over its bound", func(t *testing.T) {
		// A refused admin request's answer echoes every topic it names:
		// its body is bounded (64 KiB) before kmsg decodes it. One
		// within is answered, on the same connection.
		create := func(topics int) *kmsg.CreateTopicsRequest {
			req := kmsg.NewPtrCreateTopicsRequest()
			for i := range topics {
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("t-%05d", i), 1, 1
				req.Topics = append(req.Topics, rt)
			}
			return req
		}
		r := dialRaw(t, addr)
		r.authenticate("OAUTHBEARER", grant.Capability)
		resp := r.roundTrip(create(2)).(*kmsg.CreateTopicsResponse)
		if len(resp.Topics) != 2 || resp.Topics[1].ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("CreateTopics of 2 topics: %+v, want both refused", resp.Topics)
		}
		r.send(create(5000)) // ~100 KiB
		if !r.closedBy(time.Second) {
			t.Fatal("a 100 KiB CreateTopics was not closed at once")
		}
	})
	t.Run("slow loris", func(t *testing.T) {
		r := dialRaw(t, addr)
		r.authenticate("PLAIN", grant.Capability)
		start := time.Now()
		frame := fetchFrame(t)
		closed := false
		for i := 0; i < len(frame) && !closed; i++ { // one byte every 200ms
			if _, err := r.nc.Write(frame[i : i+1]); err != nil {
				closed = true
				break
			}
			closed = r.closedBy(200 * time.Millisecond)
		}
		if !closed || time.Since(start) > readTimeout+slack {
			t.Fatalf("a frame trickled byte by byte: closed %v after %s (read_timeout %s)", closed, time.Since(start), readTimeout)
		}
	})
	t.Run("silent before SASL", func(t *testing.T) {
		r := dialRaw(t, addr)
		if !r.closedBy(3*time.Second + slack) { // kafka_auth_timeout 3s
			t.Fatal("a connection that never authenticated outlived auth_timeout")
		}
	})

	produceDirect(t, s, "orders", 1, 5)
	pollN(t, healthy, 5) // the healthy consumer kept its connection and its partition
	healthy.Close()
	sdk.Eventually(t, 10*time.Second, "no connection or fetch left", func() (bool, string) {
		m := metrics(t, s)
		return strings.Contains(m, "capgate_gateway_kafka_connections 0\n") && strings.Contains(m, "capgate_gateway_inflight_fetches 0\n"),
			grep(m, "capgate_gateway_kafka_connections", "capgate_gateway_inflight_fetches")
	})
}

// frameHeader is a size prefix promising n bytes.
func frameHeader(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// fetchFrame is a whole Fetch request frame.
func fetchFrame(t testing.TB) []byte {
	return kmsg.NewRequestFormatter().AppendRequest(nil, fetchOne("orders", 1, 0, 0), 7)
}

// metrics reads the first gateway's /metrics.
func metrics(t testing.TB, s *Stack) string {
	t.Helper()
	return gatewayMetrics(t, s, 0)
}

// gatewayMetrics reads gateway i's /metrics.
func gatewayMetrics(t testing.TB, s *Stack, i int) string {
	t.Helper()
	resp, err := s.HTTP().Get(s.GatewayURLs()[i] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %d", resp.StatusCode)
	}
	return string(b)
}

// grep returns the lines of text starting with any of the prefixes.
func grep(text string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return fmt.Sprint(out)
}

// grepCount returns the value of the metric line starting with name.
func grepCount(text, name string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, name+" ") {
			var v float64
			fmt.Sscan(strings.TrimPrefix(l, name+" "), &v)
			return v
		}
	}
	return 0
}
