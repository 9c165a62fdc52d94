package stack

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kfake"
)

// KafkaCut cuts chosen processes off from the stack's Kafka while every
// other process, and the cut ones' own clients, carry on: a coordinator
// replica that can still answer HTTP but reaches no broker.
//
// A TCP proxy per process cannot do it: a Kafka client dials the seeds,
// then whatever addresses the brokers advertise, the same for everyone.
// So the cut sits where every connection to a broker arrives — each kfake
// broker's listener (kfake.ListenFn) — and tells processes apart by the
// client id in the header of their first request (capgate's
// broker.client_id; give each part its own). A cut connection behaves as
// the harness Proxy's blackhole: bytes either way are swallowed, a close
// is not passed on, a new connection is accepted and leads nowhere. Heal
// closes the connections that lost bytes, as TCP would reset them.
// Safe for concurrent use.
type KafkaCut struct {
	mu    sync.Mutex
	cut   map[string]bool
	conns map[*cutConn]bool
}

// NewKafkaCut returns a cut with nothing cut; pass Option() to the stack's
// KafkaOptions.
func NewKafkaCut() *KafkaCut {
	return &KafkaCut{cut: map[string]bool{}, conns: map[*cutConn]bool{}}
}

// Option makes kfake's brokers listen through the cut.
func (k *KafkaCut) Option() kfake.Opt {
	return kfake.ListenFn(func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		return &cutListener{Listener: ln, k: k}, nil
	})
}

// Cut swallows everything between Kafka and the process whose client id
// is clientID, from now on.
func (k *KafkaCut) Cut(clientID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cut[clientID] = true
}

// Heal ends clientID's cut; its connections that lost bytes are closed.
func (k *KafkaCut) Heal(clientID string) {
	k.mu.Lock()
	delete(k.cut, clientID)
	var broken []*cutConn
	for c := range k.conns {
		if c.clientID == clientID && c.damaged {
			broken = append(broken, c)
			delete(k.conns, c)
		}
	}
	k.mu.Unlock()
	for _, c := range broken {
		c.closeNow()
	}
}

// Swallowed reports how many connections of clientID lost bytes to the
// cut so far and are still open (a test's proof the cut was met).
func (k *KafkaCut) Swallowed(clientID string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for c := range k.conns {
		if c.clientID == clientID && c.damaged {
			n++
		}
	}
	return n
}

type cutListener struct {
	net.Listener
	k *KafkaCut
}

func (l *cutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: c, k: l.k, closed: make(chan struct{})}, nil
}

// cutConn is one client connection to a broker, seen from the broker.
type cutConn struct {
	net.Conn
	k       *KafkaCut
	head    []byte      // the first request's bytes read to learn the client id, not yet handed on
	known   atomic.Bool // clientID is set
	once    sync.Once
	closed  chan struct{}
	readMu  sync.Mutex
	writeMu sync.Mutex

	// under k.mu
	clientID string
	damaged  bool
}

// blocked reports whether the connection's process is cut now; a cut
// connection is marked damaged when it had bytes to swallow.
func (c *cutConn) blocked(swallowing bool) bool {
	c.k.mu.Lock()
	defer c.k.mu.Unlock()
	if !c.k.cut[c.clientID] {
		return false
	}
	if swallowing {
		c.damaged = true
	}
	return true
}

// learn reads the first request's header: size (4), api key (2), version
// (2), correlation id (4), client id (2 + n) — the request header every
// Kafka client sends first (v1 and later headers all start so).
func (c *cutConn) learn() error {
	fixed := make([]byte, 14)
	if _, err := io.ReadFull(c.Conn, fixed); err != nil {
		return err
	}
	n := int16(binary.BigEndian.Uint16(fixed[12:]))
	id := []byte{}
	if n > 0 {
		id = make([]byte, n)
		if _, err := io.ReadFull(c.Conn, id); err != nil {
			return err
		}
	}
	c.head = append(fixed, id...)
	c.k.mu.Lock()
	c.clientID = string(id)
	c.k.conns[c] = true
	c.k.mu.Unlock()
	c.known.Store(true)
	return nil
}

func (c *cutConn) Read(b []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	if !c.known.Load() {
		if err := c.learn(); err != nil {
			return 0, err
		}
	}
	for {
		if len(c.head) > 0 {
			if c.blocked(true) {
				c.head = nil
				continue
			}
			n := copy(b, c.head)
			c.head = c.head[n:]
			return n, nil
		}
		n, err := c.Conn.Read(b)
		if !c.blocked(n > 0) {
			return n, err
		}
		if err != nil {
			// The broker learns nothing of a close in the cut: it waits
			// until the heal or the cluster closes the connection.
			<-c.closed
			return 0, fmt.Errorf("stack: kafka cut: %w", net.ErrClosed)
		}
	}
}

func (c *cutConn) Write(b []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.known.Load() && c.blocked(len(b) > 0) {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *cutConn) Close() error {
	c.k.mu.Lock()
	delete(c.k.conns, c)
	c.k.mu.Unlock()
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *cutConn) closeNow() { _ = c.Close() }
