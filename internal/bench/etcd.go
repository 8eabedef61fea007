package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// Etcd is the etcd side of the benchmarks: etcd's own election recipe,
// go.etcd.io/etcd/client/v3/concurrency, against a single-node etcd.
type Etcd struct {
	Endpoints []string
}

// Client opens one etcd client: one member process.
func (e *Etcd) Client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   e.Endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

type campaigned struct {
	err error
	at  time.Time
}

func etcdCampaign(ctx context.Context, election *concurrency.Election, value string) <-chan campaigned {
	ch := make(chan campaigned, 1)
	go func() {
		err := election.Campaign(ctx, value)
		ch <- campaigned{err: err, at: time.Now()}
	}()
	return ch
}

// etcdSettle is how long a benchmark lets a new candidate settle before it
// acts: etcd moves a watch that starts at a past revision into its synced
// group only on its next sync pass, every 100 ms, and until then an event
// reaches the watcher at that pass, not at once.
const etcdSettle = 150 * time.Millisecond

// waitCandidates waits until n keys sit under the election prefix, and then
// etcdSettle more, so that the last campaign watches its predecessor.
func waitCandidates(ctx context.Context, client *clientv3.Client, prefix string, n int64) error {
	for {
		resp, err := client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		if resp.Count >= n {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(etcdSettle):
		return nil
	}
}

// keepAliveClock records the arrival of every keep-alive response of a
// lease. The lease expires TTL after the server took the last one.
type keepAliveClock struct {
	mu   sync.Mutex
	last time.Time
}

func (k *keepAliveClock) run(ch <-chan *clientv3.LeaseKeepAliveResponse) {
	for range ch {
		k.mu.Lock()
		k.last = time.Now()
		k.mu.Unlock()
	}
}

func (k *keepAliveClock) get() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.last
}

// etcdMember is one member process of the failover benchmark.
type etcdMember struct {
	client   *clientv3.Client
	session  *concurrency.Session
	election *concurrency.Election
	clock    *keepAliveClock
	stop     context.CancelFunc
}

func (e *Etcd) member(ctx context.Context, prefix string, ttl int) (*etcdMember, error) {
	c, err := e.Client()
	if err != nil {
		return nil, err
	}
	grant, err := c.Grant(ctx, int64(ttl))
	if err != nil {
		c.Close()
		return nil, err
	}
	s, err := concurrency.NewSession(c, concurrency.WithLease(grant.ID))
	if err != nil {
		c.Close()
		return nil, err
	}
	kaCtx, stop := context.WithCancel(context.Background())
	ch, err := c.KeepAlive(kaCtx, grant.ID)
	if err != nil {
		stop()
		c.Close()
		return nil, err
	}
	clock := &keepAliveClock{last: time.Now()}
	go clock.run(ch)
	return &etcdMember{client: c, session: s, election: concurrency.NewElection(s, prefix), clock: clock, stop: stop}, nil
}

// crash stops the keep-alives without revoking the lease, as a dead process
// does, and returns the instant the lease expires.
func (m *etcdMember) crash(ttl int) time.Time {
	m.session.Orphan()
	m.stop()
	last := m.clock.get()
	m.client.Close()
	return last.Add(time.Duration(ttl) * time.Second)
}

func (m *etcdMember) close() {
	m.stop()
	m.session.Close()
	m.client.Close()
}

// EtcdFailover measures the failover after a crash: the holder stops its
// keep-alives right after one, and the standby's Campaign returns once
// etcd expired the holder's lease. A sample runs from the expiry instant
// (the last keep-alive plus the TTL) to the return of Campaign. Parallel
// elections run side by side, each with its own prefix, to keep the run
// short.
func (e *Etcd) EtcdFailover(ctx context.Context, rounds, parallel, ttl int) ([]time.Duration, error) {
	var (
		mu      sync.Mutex
		samples []time.Duration
		errs    []error
		wg      sync.WaitGroup
	)
	for p := range parallel {
		wg.Go(func() {
			// Spread the elections over the TTL.
			time.Sleep(time.Duration(p) * time.Duration(ttl) * time.Second / time.Duration(parallel))
			got, err := e.etcdFailoverOne(ctx, rounds, ttl)
			mu.Lock()
			defer mu.Unlock()
			samples = append(samples, got...)
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	return samples, errors.Join(errs...)
}

func (e *Etcd) etcdFailoverOne(ctx context.Context, rounds, ttl int) ([]time.Duration, error) {
	prefix := "/krabka-bench/failover-" + Suffix() + "/"
	holder, err := e.member(ctx, prefix, ttl)
	if err != nil {
		return nil, err
	}
	if err := holder.election.Campaign(ctx, "h"); err != nil {
		holder.close()
		return nil, err
	}
	var samples []time.Duration
	for range rounds {
		standby, err := e.member(ctx, prefix, ttl)
		if err != nil {
			holder.close()
			return samples, err
		}
		ch := etcdCampaign(ctx, standby.election, "s")
		if err := waitCandidates(ctx, standby.client, prefix, 2); err != nil {
			holder.close()
			standby.close()
			return samples, err
		}
		// Crash right after a keep-alive.
		last := holder.clock.get()
		for holder.clock.get().Equal(last) {
			time.Sleep(500 * time.Microsecond)
		}
		expiry := holder.crash(ttl)
		r := <-ch
		if r.err != nil {
			standby.close()
			return samples, r.err
		}
		samples = append(samples, r.at.Sub(expiry))
		holder = standby
	}
	holder.close()
	return samples, nil
}

// etcdLeader campaigns once and returns the elected member for the write
// benchmarks.
func (e *Etcd) etcdLeader(ctx context.Context) (*clientv3.Client, *concurrency.Session, *concurrency.Election, func(), error) {
	c, err := e.Client()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	s, err := concurrency.NewSession(c, concurrency.WithTTL(30))
	if err != nil {
		c.Close()
		return nil, nil, nil, nil, err
	}
	election := concurrency.NewElection(s, "/krabka-bench/write-"+Suffix()+"/")
	if err := election.Campaign(ctx, "writer"); err != nil {
		s.Close()
		c.Close()
		return nil, nil, nil, nil, err
	}
	return c, s, election, func() {
		_ = election.Resign(context.Background())
		s.Close()
		c.Close()
	}, nil
}

// guardedPut is the guarded write that etcd's documentation recommends for
// an election: a transaction that puts only while the leader key still has
// the create revision of this leadership.
func guardedPut(ctx context.Context, c *clientv3.Client, election *concurrency.Election, ops []clientv3.Op) error {
	resp, err := c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(election.Key()), "=", election.Rev())).
		Then(ops...).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return errors.New("etcd: the leader key moved: not the leader")
	}
	return nil
}

// EtcdMaxTxnOps is etcd's default --max-txn-ops: the most puts one guarded
// transaction carries.
const EtcdMaxTxnOps = 128

// EtcdThroughput measures guarded commands per second: writers goroutines
// over one client, each putting batch commands per transaction (distinct
// keys: etcd refuses a key twice in one transaction).
func (e *Etcd) EtcdThroughput(ctx context.Context, writers, batch, windows int, window time.Duration) ([]float64, error) {
	c, _, election, done, err := e.etcdLeader(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	prefix := "/krabka-bench/cmd-" + Suffix() + "/"
	opsFor := make([][]clientv3.Op, writers)
	for w := range writers {
		for i := range batch {
			opsFor[w] = append(opsFor[w], clientv3.OpPut(fmt.Sprintf("%s%d/%d", prefix, w, i), string(Command)))
		}
	}
	var next sync.Mutex
	id := 0
	return throughput(ctx, writers, batch, windows, window, func(ctx context.Context) error {
		next.Lock()
		w := id % writers
		id++
		next.Unlock()
		return guardedPut(ctx, c, election, opsFor[w])
	})
}

// EtcdHandoverSession is EtcdHandover sample by sample: two clients take
// turns on one election.
type EtcdHandoverSession struct {
	prefix    string
	clients   [2]*clientv3.Client
	sessions  [2]*concurrency.Session
	elections [2]*concurrency.Election
	h         int
}

// NewHandoverSession opens the two clients and lets the first one win.
func (e *Etcd) NewHandoverSession(ctx context.Context) (*EtcdHandoverSession, error) {
	s := &EtcdHandoverSession{prefix: "/krabka-bench/handover-" + Suffix() + "/"}
	for i := range s.elections {
		c, err := e.Client()
		if err != nil {
			s.Close()
			return nil, err
		}
		s.clients[i] = c
		if s.sessions[i], err = concurrency.NewSession(c, concurrency.WithTTL(10)); err != nil {
			s.Close()
			return nil, err
		}
		s.elections[i] = concurrency.NewElection(s.sessions[i], s.prefix)
	}
	if err := s.elections[0].Campaign(ctx, "0"); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Sample takes one handover: from the start of Resign to the return of the
// standby's Campaign, once the standby watches (untimed, etcdSettle).
func (s *EtcdHandoverSession) Sample(ctx context.Context) (Sample, error) {
	standby := 1 - s.h
	ch := etcdCampaign(ctx, s.elections[standby], fmt.Sprint(standby))
	if err := waitCandidates(ctx, s.clients[s.h], s.prefix, 2); err != nil {
		return Sample{}, err
	}
	start := time.Now()
	if err := s.elections[s.h].Resign(ctx); err != nil {
		return Sample{}, err
	}
	r := <-ch
	if r.err != nil {
		return Sample{}, r.err
	}
	s.h = standby
	return Sample{D: r.at.Sub(start)}, nil
}

// Close ends the sessions and closes the clients.
func (s *EtcdHandoverSession) Close() {
	for i := range s.clients {
		if s.sessions[i] != nil {
			s.sessions[i].Close()
		}
		if s.clients[i] != nil {
			s.clients[i].Close()
		}
	}
}

// EtcdWriteSession is EtcdWriteLatency sample by sample.
type EtcdWriteSession struct {
	c        *clientv3.Client
	election *concurrency.Election
	done     func()
	key      string
}

// NewWriteSession campaigns once for the writer.
func (e *Etcd) NewWriteSession(ctx context.Context) (*EtcdWriteSession, error) {
	c, _, election, done, err := e.etcdLeader(ctx)
	if err != nil {
		return nil, err
	}
	return &EtcdWriteSession{c: c, election: election, done: done, key: "/krabka-bench/cmd-" + Suffix()}, nil
}

// Sample takes one guarded put of one command.
func (s *EtcdWriteSession) Sample(ctx context.Context) (Sample, error) {
	start := time.Now()
	if err := guardedPut(ctx, s.c, s.election, []clientv3.Op{clientv3.OpPut(s.key, string(Command))}); err != nil {
		return Sample{}, err
	}
	return Sample{D: time.Since(start)}, nil
}

// Close resigns and closes the client.
func (s *EtcdWriteSession) Close() { s.done() }
