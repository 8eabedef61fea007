package chaos

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// CutMode says how a [Proxy] cuts its member off the broker.
type CutMode string

const (
	// CutDrop resets every connection at once (a TCP RST to the member),
	// and resets every new connection as soon as it is accepted, until the
	// heal. The client sees "connection reset by peer", as from a host that
	// rejects its packets, never a clean end of stream.
	CutDrop CutMode = "drop"

	// CutStall stops the bytes of every connection, old and new, in both
	// directions, until the heal, and then delivers what it held. The client
	// sees a silent network, and the broker sees the held requests late.
	CutStall CutMode = "stall"
)

// Proxy forwards the TCP connections of one member to one broker on
// loopback, and cuts them on demand. A proxy of [NewProxy] needs no
// knowledge of Kafka; one of [NewKafkaProxy] reads Kafka's framing (a
// 4-byte size, then the request header: API key, version, correlation id)
// so that it can also fault one request ([Arm], requestfault.go) and count
// the requests by API key and version ([Proxy.Requests]). Either way the
// answers go back on the connection that asked, in order.
//
// A connection whose broker cannot be dialled (a broker that is down) is
// reset (RST), as the broker's host resets a connection to a closed port,
// and so is every connection at a drop. A clean close (FIN) right after the
// accept would read to franz-go as a broker that refused the handshake
// (kgo.ErrFirstReadEOF, "requires TLS"), which it does not retry and which
// fails a transactional producer for good: that is no fault of a real
// network.
//
// A Proxy owns one accept goroutine and two goroutines for each connection;
// [Proxy.Close] ends all of them and waits for them. It is safe for
// concurrent use.
type Proxy struct {
	listener net.Listener
	target   string

	mu    sync.Mutex
	links map[*link]struct{}
	mode  CutMode       // "" while healed
	gate  chan struct{} // closed while healed; a stall holds bytes on it

	kafka  bool               // Kafka-aware: frames, request faults, counts
	armed  []*ArmedRequest    // the armed request faults, earliest first
	counts map[[2]int16]int64 // (API key, version) -> requests forwarded
	sent   map[int16]int64    // API key -> requests forwarded
	onMint func(Mint)         // told of every InitProducerId answer (OnMint)

	wg sync.WaitGroup
}

// link is one proxied connection.
type link struct {
	client     net.Conn
	upstream   net.Conn // nil until dialled
	once       sync.Once
	done       chan struct{}
	ended      atomic.Int32 // directions that reached EOF
	clientDead atomic.Bool  // the client's side is gone; answers go nowhere

	mu       sync.Mutex
	swallows map[int32]*swallow      // correlation id -> answers to swallow
	waiting  map[int32]chan struct{} // correlation id -> closed at its answer
	mints    map[int32]*mintWatch    // correlation id -> a faulted InitProducerId whose answers are read
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.client.Close()
		if l.upstream != nil {
			l.upstream.Close()
		}
	})
}

// reset closes the link with a TCP RST to the client.
func (l *link) reset() {
	resetConn(l.client)
	l.close()
}

// resetConn makes the next Close of conn send a TCP RST instead of a FIN.
func resetConn(conn net.Conn) {
	if c, ok := conn.(*net.TCPConn); ok {
		_ = c.SetLinger(0)
	}
}

// NewProxy listens on listen (for example "127.0.0.1:0") and forwards every
// connection to target.
func NewProxy(listen, target string) (*Proxy, error) {
	return openProxy(listen, target, false)
}

// NewKafkaProxy is [NewProxy] for a Kafka broker: it forwards whole frames,
// and can fault one request of a chosen API key ([Arm]).
func NewKafkaProxy(listen, target string) (*Proxy, error) {
	return openProxy(listen, target, true)
}

func openProxy(listen, target string, kafka bool) (*Proxy, error) {
	listener, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	gate := make(chan struct{})
	close(gate)
	p := &Proxy{listener: listener, target: target, links: make(map[*link]struct{}), gate: gate,
		kafka: kafka, counts: make(map[[2]int16]int64), sent: make(map[int16]int64)}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address the proxy listens on.
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// Cut cuts the member off the broker until [Proxy.Heal]. A second Cut
// replaces the mode of the first.
func (p *Proxy) Cut(mode CutMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == "" {
		p.gate = make(chan struct{})
	}
	p.mode = mode
	if mode == CutDrop {
		for l := range p.links {
			l.reset()
			delete(p.links, l)
		}
	}
}

// Heal ends a cut. The bytes that a stall held go on to their peers.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == "" {
		return
	}
	p.mode = ""
	close(p.gate)
}

// Close stops the listener, closes every connection, and waits for every
// goroutine of the proxy.
func (p *Proxy) Close() error {
	err := p.listener.Close()
	p.Heal()
	p.mu.Lock()
	for l := range p.links {
		l.close()
		delete(p.links, l)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		conn, err := p.listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.mu.Lock()
		if p.mode == CutDrop {
			p.mu.Unlock()
			resetConn(conn)
			conn.Close()
			continue
		}
		l := &link{client: conn, done: make(chan struct{})}
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(l)
	}
}

// serve dials the broker once the gate opens and pumps both directions.
func (p *Proxy) serve(l *link) {
	defer p.wg.Done()
	defer p.forget(l)
	if !p.pass(l) {
		return
	}
	upstream, err := net.Dial("tcp", p.target)
	if err != nil {
		l.reset() // the broker is down: its host would reset the connection
		return
	}
	p.mu.Lock()
	_, live := p.links[l]
	if live {
		l.upstream = upstream
	}
	p.mu.Unlock()
	if !live {
		upstream.Close()
		return
	}
	if p.kafka {
		p.serveFrames(l, upstream)
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.pump(l, upstream, l.client)
	}()
	p.pump(l, l.client, upstream)
}

// pump copies src to dst, holding every chunk at the gate. An EOF from src
// half-closes dst, so the peer sees the end after the held bytes; the link
// closes when both directions ended, or at once on any other error.
func (p *Proxy) pump(l *link, src, dst net.Conn) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass(l) {
				l.close()
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				l.close()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if c, ok := dst.(*net.TCPConn); ok {
					_ = c.CloseWrite()
				}
				if l.ended.Add(1) == 2 {
					l.close()
				}
				return
			}
			l.close()
			return
		}
	}
}

// pass waits at the gate; it reports false when the link closed meanwhile.
func (p *Proxy) pass(l *link) bool {
	for {
		p.mu.Lock()
		gate := p.gate
		p.mu.Unlock()
		select {
		case <-gate:
			// The gate may have been replaced by a new cut after it opened;
			// a cut that came since then holds the chunk on the next lap.
			p.mu.Lock()
			open := p.mode == ""
			p.mu.Unlock()
			if open {
				return true
			}
		case <-l.done:
			return false
		}
	}
}

func (p *Proxy) forget(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}
