package kafkaproto

// Behavior: each Kafka connection's socket send buffer is bounded
// (SendBufferBytes, gateway.kafka_send_buffer_bytes: 102,400 by default,
// Kafka's socket.send.buffer.bytes). An answer is counted among the
// answers held (conn.write, fetch.go) only while the gateway writes it:
// what the kernel takes is given back at once. Left to the system, Linux
// grows a connection's buffer up to tcp_wmem's maximum (4 MB by
// default), so a connection that reads nothing held ~4 MB of answers in
// kernel memory, uncounted: 256 of a tenant ~1 GB (redteam19's
// recommendation 2). Bounded, a connection leaves at most twice the
// setting there (Linux doubles it for its bookkeeping), and what does not
// fit is counted while it waits (answerRoom, max_answer_bytes_held).
// What it costs: one connection's throughput is at most about twice the
// buffer per round trip — ~200 KB a round trip, 4 MB/s at 50 ms, far
// more on a LAN; a gateway serving consumers across a WAN raises it (or
// sets 0: the system's own).

import "net"

// SendBufferBytesMin and SendBufferBytesMax bound SendBufferBytes when
// set.
const (
	SendBufferBytesMin = 4 << 10
	SendBufferBytesMax = 64 << 20
)

// sendBufferListener sets each accepted TCP connection's send buffer.
type sendBufferListener struct {
	net.Listener
	bytes int
}

func (l sendBufferListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		if err := tc.SetWriteBuffer(l.bytes); err != nil {
			nc.Close() // unbounded, its answers would escape the count
			return nil, err
		}
	}
	return nc, nil
}
