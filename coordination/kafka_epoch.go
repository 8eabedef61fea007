package coordination

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The epochs of KafkaTransport: AcquireEpoch mints one with InitProducerId
// on a transactional client of its own (transactional.id = the role, the
// lease duration as transaction timeout), warmed ahead of the mint when the
// member registers; DescribeEpoch reads the coordinator's pair with
// DescribeTransactions. The transactional writes under a minted epoch are
// in kafka_txn.go.

// concurrentTransactionsBackoff is the pause of a transactional client
// before it retries a request that the coordinator refused with
// CONCURRENT_TRANSACTIONS. Under transaction.version 1 the coordinator
// refuses the next transaction's AddPartitionsToTxn, and a new mint's
// InitProducerId, until it has written the markers of the previous commit,
// a fraction of a millisecond on loopback. franz-go's default of 20 ms made
// every back-to-back guarded write take 22 ms instead of about two. The
// pause asks for 250 µs; an idle Go process wakes from it after about a
// millisecond (the netpoller sleeps in whole milliseconds), which is what a
// back-to-back write pays now. franz-go raises the pause itself when the
// state lasts (200 ms after a second), so a stuck coordinator sees no
// storm.
const concurrentTransactionsBackoff = 250 * time.Microsecond

// epochProducer is the transactional client of one minted epoch.
//
// A transaction holds slot from its first request to its end, so the
// transactions of one epoch run one at a time. mu guards only client and
// closeErr, and is held for moments: a caller that gives up on a
// transaction in flight closes the producer without waiting for the slot.
type epochProducer struct {
	role     Role
	token    FencingToken
	requests *requestCounter
	slot     chan struct{}   // a semaphore of one, held for a whole transaction
	closers  *sync.WaitGroup // the transport's; close ends client on it

	mu       sync.Mutex  // guards client and closeErr
	client   *kgo.Client // nil once closed
	baseline int64       // requests.inits right after the mint
	closeErr error       // why client is nil; wraps ErrFenced, ErrProducerLost or ErrNotAuthorized
}

// requestCounter counts the InitProducerId and EndTxn requests that one
// client writes. An InitProducerId after the mint means that franz-go set
// out to recover its producer id, which moves the epoch away from the token.
type requestCounter struct{ inits, endTxns atomic.Int64 }

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (c *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	switch key {
	case kmsg.InitProducerID.Int16():
		c.inits.Add(1)
	case kmsg.EndTxn.Int16():
		c.endTxns.Add(1)
	}
}

// close closes the client for good and records why, the first time only,
// and returns the reason that stands. The reason wraps ErrFenced when the
// broker refused the token or the epoch moved, ErrNotAuthorized (and
// ErrProducerLost) when the cluster refused the transactional id, and
// ErrProducerLost otherwise: only a refusal of the token means that the
// role went elsewhere. Closing a franz-go client fails its requests in
// flight at once, so a transaction that runs on it ends promptly.
func (p *epochProducer) close(reason error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client == nil {
		return p.closeErr
	}
	switch {
	case errors.Is(reason, ErrFenced), errors.Is(reason, ErrProducerLost):
	case kafkaFailureOf(reason) == failureFenced:
		reason = fmt.Errorf("%w: %w", reason, ErrFenced)
	case kafkaFailureOf(reason) == failureDenied && !errors.Is(reason, ErrNotAuthorized):
		reason = fmt.Errorf("%w: %w: %w", reason, ErrNotAuthorized, ErrProducerLost)
	default:
		reason = fmt.Errorf("%w: %w", reason, ErrProducerLost)
	}
	p.closers.Go(p.client.Close)
	p.client = nil
	p.closeErr = reason
	return reason
}

// closed returns why the producer was closed, and nil while it is open.
func (p *epochProducer) closed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client == nil {
		return p.closeErr
	}
	return nil
}

// reinitialised reports a franz-go recovery of the producer id since the
// mint.
func (p *epochProducer) reinitialised() bool { return p.requests.inits.Load() != p.baseline }

// AcquireEpoch mints a new epoch of the role and fences every earlier one,
// this transport's own included. It closes the transactional client of the
// role's previous mint in this transport, opens a new one with
// transactional.id = the role name, and calls InitProducerId through it, so
// every call mints: the transaction coordinator bumps the epoch of the id, or
// allocates a new producer id when the epoch is exhausted, and aborts an open
// transaction of the previous holder.
//
// It retries CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
// NOT_COORDINATOR and connection errors until ctx ends, and then returns the
// context's error. It returns a permanent error for a missing ACL (WRITE on
// the TransactionalId) and for a lease duration above the broker's
// transaction.max.timeout.ms. Concurrent calls for one role run one after
// the other.
func (t *KafkaTransport) AcquireEpoch(ctx context.Context, role Role) (FencingToken, error) {
	if role.IsZero() {
		return NoEpoch, errors.New("coordination: AcquireEpoch: the zero Role has no transactional id")
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return NoEpoch, errTransportClosed
	}
	mint := t.minting[role]
	if mint == nil {
		mint = new(sync.Mutex)
		t.minting[role] = mint
	}
	t.mu.Unlock()

	mint.Lock()
	defer mint.Unlock()
	t.mu.Lock()
	previous := t.current[role]
	t.mu.Unlock()
	if previous != nil {
		previous.close(fmt.Errorf("coordination: token %s of role %s: this transport minted a newer epoch of the role: %w", previous.token, role, ErrFenced))
	}

	client, requests := t.takeWarm(role)
	if client == nil {
		var err error
		if client, requests, err = t.newTxnClient(role); err != nil {
			return NoEpoch, wrapf(err, nil, "AcquireEpoch of role %s", role)
		}
	}
	token, err := t.initProducerID(ctx, client, role)
	if err != nil {
		client.Close()
		return NoEpoch, err
	}
	producer := &epochProducer{role: role, token: token, requests: requests, slot: make(chan struct{}, 1), closers: &t.closers, client: client, baseline: requests.inits.Load()}

	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		client.Close()
		return NoEpoch, errTransportClosed
	}
	t.current[role] = producer
	t.minted[token] = producer
	return token, nil
}

// newTxnClient opens the transactional client of one mint of role.
func (t *KafkaTransport) newTxnClient(role Role) (*kgo.Client, *requestCounter, error) {
	requests := new(requestCounter)
	client, err := kgo.NewClient(append(slices.Clone(t.baseOptions),
		kgo.TransactionalID(role.String()),
		kgo.TransactionTimeout(t.lease.Duration()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.ConcurrentTransactionsBackoff(concurrentTransactionsBackoff),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxVersions(t.versions),
		kgo.WithHooks(requests),
	)...)
	return client, requests, err
}

// warmTimeout bounds the requests that warm a client.
const warmTimeout = 5 * time.Second

// maxWarm bounds the warm clients of one transport. A warm client costs a
// franz-go client (tens of kilobytes and a few goroutines, and its
// connections until they idle out after 30 s), so a process that waits for
// many roles warms the first maxWarm of them only; the others mint as
// before, on a fresh client.
const maxWarm = 32

// warmClient is a transactional client that a candidate's registration
// opened ahead of its mint. Its warm-up makes it learn the brokers and the
// transaction coordinator of the role and open the connection to the
// coordinator, so that the mint of a challenge skips the client's setup,
// its seed connection, FindCoordinator and the broker metadata: about
// 1.5 ms on loopback, a third of a handover. franz-go closes the connection
// after 30 s idle; a mint after a longer wait dials it again (a fraction of
// a millisecond) and keeps the rest.
type warmClient struct {
	client   *kgo.Client
	requests *requestCounter
	cancel   context.CancelFunc
}

// prewarm opens the transactional client of the next mint of role, once,
// when this transport appends a registration of the role: the member
// campaigns, and may challenge. The warm-up runs in the background and
// writes nothing: one DescribeTransactions of the role, which loads the
// brokers, finds the role's transaction coordinator, and opens the
// connection to it. It takes no epoch, and a failure only leaves the client
// cold. (An empty Produce request through the client would open its
// producing connection too, but with one the resignation of
// TestKafkaLeadershipKafka/Lifecycle stayed invisible to readers on Kafka
// 4.4, for a reason not yet understood: do not add one.)
//
// A warm client that no mint takes is closed by the deregistration of the
// role, or by Close.
func (t *KafkaTransport) prewarm(role Role) {
	t.mu.Lock()
	full := t.closed || t.warm[role] != nil || len(t.warm) >= maxWarm
	t.mu.Unlock()
	if full {
		return
	}
	client, requests, err := t.newTxnClient(role)
	if err != nil {
		return
	}
	t.mu.Lock()
	if t.closed || t.warm[role] != nil || len(t.warm) >= maxWarm {
		t.mu.Unlock()
		client.Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), warmTimeout)
	t.warm[role] = &warmClient{client: client, requests: requests, cancel: cancel}
	t.mu.Unlock()
	go func() {
		defer cancel()
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{role.String()}
		_, _ = client.Request(ctx, req)
	}()
}

// takeWarm hands the warm client of role to a mint, or nil.
func (t *KafkaTransport) takeWarm(role Role) (*kgo.Client, *requestCounter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.warm[role]
	if w == nil {
		return nil, nil
	}
	delete(t.warm, role)
	return w.client, w.requests
}

// dropWarm closes the warm client of role, after the member deregistered.
func (t *KafkaTransport) dropWarm(role Role) {
	t.mu.Lock()
	w := t.warm[role]
	delete(t.warm, role)
	t.mu.Unlock()
	if w != nil {
		w.cancel()
		w.client.Close()
	}
}

// initProducerID calls InitProducerId through a fresh client until it
// succeeds, fails for good, or ctx ends.
func (t *KafkaTransport) initProducerID(ctx context.Context, client *kgo.Client, role Role) (FencingToken, error) {
	backoff := 50 * time.Millisecond
	for {
		id, epoch, err := client.ProducerID(ctx)
		if err == nil {
			token, err := NewFencingToken(id, epoch)
			if err != nil {
				return NoEpoch, wrapf(err, nil, "AcquireEpoch of role %s: the broker minted no producer id (is it older than Kafka 0.11?)", role)
			}
			return token, nil
		}
		if errors.Is(err, kerr.InvalidTransactionTimeout) {
			return NoEpoch, fmt.Errorf("coordination: AcquireEpoch of role %s: the broker refuses the lease duration %v as transaction timeout; "+
				"shorten the lease or raise transaction.max.timeout.ms: %w: %w", role, t.lease.Duration(), ErrMisconfigured, err)
		}
		if !retriableMint(err) || ctx.Err() != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
			}
			return NoEpoch, describeKafkaError("AcquireEpoch of role "+role.String(), err)
		}
		select {
		case <-ctx.Done():
			return NoEpoch, fmt.Errorf("coordination: AcquireEpoch of role %s: %w (last error: %w)", role, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// DescribeEpoch reports the producer id and epoch that the transaction
// coordinator holds for the transactional id of the role, with one
// DescribeTransactions request. It joins no group and takes no epoch.
//
// It returns [NoEpoch] and false, with no error, for a transactional id that
// the coordinator does not know (never used, or expired after
// transactional.id.expiration.ms), that is Dead, or that carries a negative
// id or epoch. It returns a permanent error for a missing DESCRIBE ACL on
// the TransactionalId.
func (t *KafkaTransport) DescribeEpoch(ctx context.Context, role Role) (FencingToken, bool, error) {
	if role.IsZero() {
		return NoEpoch, false, errors.New("coordination: DescribeEpoch: the zero Role has no transactional id")
	}
	if t.isClosed() {
		return NoEpoch, false, errTransportClosed
	}
	op := "DescribeEpoch of role " + role.String()
	backoff := 50 * time.Millisecond
	for {
		token, held, err := t.describeEpochOnce(ctx, role, op)
		if err == nil || !retriableMint(err) {
			return token, held, err
		}
		select {
		case <-ctx.Done():
			return NoEpoch, false, fmt.Errorf("coordination: %s: %w (last error: %w)", op, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// describeEpochOnce is one DescribeTransactions of DescribeEpoch.
func (t *KafkaTransport) describeEpochOnce(ctx context.Context, role Role, op string) (FencingToken, bool, error) {
	described, err := t.admin.DescribeTransactions(ctx, role.String())
	if err != nil {
		return NoEpoch, false, describeKafkaError(op, err)
	}
	txn, ok := described[role.String()]
	if !ok {
		return NoEpoch, false, nil
	}
	if txn.Err != nil {
		if errors.Is(txn.Err, kerr.TransactionalIDNotFound) {
			return NoEpoch, false, nil
		}
		return NoEpoch, false, describeKafkaError(op, txn.Err)
	}
	if txn.State == "Dead" || txn.ProducerID < 0 || txn.ProducerEpoch < 0 {
		return NoEpoch, false, nil
	}
	token, err := NewFencingToken(txn.ProducerID, txn.ProducerEpoch)
	if err != nil {
		return NoEpoch, false, nil
	}
	return token, true, nil
}
