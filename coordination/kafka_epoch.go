package coordination

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The epochs of KafkaTransport: AcquireEpoch mints one with a raw
// InitProducerId (transactional id = the role, the lease duration as
// transaction timeout) through the one transactional client that every
// role of the transport shares; a registration warms the route to the
// role's transaction coordinator ahead of the mint; DescribeEpoch reads the
// coordinator's pair with DescribeTransactions. The transactions under a
// minted epoch are in kafka_txn.go.

// concurrentTransactionsBackoff is the first pause before a request that
// the coordinator refused with CONCURRENT_TRANSACTIONS is sent again, after
// concurrentTransactionsResends resends without a pause. Under
// transaction.version 1 the coordinator refuses the next transaction's
// AddPartitionsToTxn, and a new mint's InitProducerId, until it has written
// the markers of the previous commit, a fraction of a millisecond on
// loopback. franz-go's default pause of 20 ms made every back-to-back
// guarded write take 22 ms instead of about two; a pause of 250 µs still
// cost about a millisecond, because an idle Go process wakes from a short
// sleep after about one (the netpoller sleeps in whole milliseconds). A
// resend at once costs one round trip instead, which is about how long the
// markers take. The pause grows when the state lasts, as franz-go's does
// (200 ms after a second, 500 ms after 2.5 s, 1 s after 5 s), so a stuck
// coordinator sees no storm.
const concurrentTransactionsBackoff = 250 * time.Microsecond

// concurrentTransactionsResends is how many times a request refused with
// CONCURRENT_TRANSACTIONS goes again at once, before the pauses of
// concurrentTransactionsBackoff.
const concurrentTransactionsResends = 3

// withConcurrentTransactions runs do until it returns something other than
// CONCURRENT_TRANSACTIONS, resending at once concurrentTransactionsResends
// times and then pausing between the attempts as
// concurrentTransactionsBackoff says, or until ctx ends; it then returns
// the last error.
func withConcurrentTransactions(ctx context.Context, do func() error) error {
	start := time.Now()
	backoff := concurrentTransactionsBackoff
	for attempt := 0; ; attempt++ {
		err := do()
		if !errors.Is(err, kerr.ConcurrentTransactions) {
			return err
		}
		if attempt < concurrentTransactionsResends {
			if ctx.Err() != nil {
				return err
			}
			continue
		}
		switch since := time.Since(start); {
		case since > 5*time.Second:
			backoff = max(backoff, time.Second)
		case since > 5*time.Second/2:
			backoff = max(backoff, 500*time.Millisecond)
		case since > time.Second:
			backoff = max(backoff, 200*time.Millisecond)
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
	}
}

// epochProducer is the state of one minted epoch: its token, the sequence
// numbers of its partitions, and why it ended.
//
// A transaction holds slot from its first request to its end, so the
// transactions of one epoch run one at a time, and only the holder of the
// slot touches sequences. mu guards closeErr, and is held for moments: a
// caller that gives up on a transaction in flight closes the producer
// without waiting for the slot.
type epochProducer struct {
	role  Role
	token FencingToken
	slot  chan struct{} // a semaphore of one, held for a whole transaction

	// ctx ends when the producer closes: every request of the epoch's
	// transactions runs under it, so a closed producer's transaction in
	// flight fails at once.
	ctx    context.Context
	cancel context.CancelFunc

	// sequences is the next sequence number of each partition that the
	// epoch wrote: the broker keeps one per (producer id, partition), and
	// a new epoch starts every partition at 0. Guarded by slot.
	sequences map[TopicPartition]int32

	mu       sync.Mutex
	closeErr error // nil while open; wraps ErrFenced, ErrProducerLost or ErrNotAuthorized
}

func newEpochProducer(role Role, token FencingToken) *epochProducer {
	ctx, cancel := context.WithCancel(context.Background())
	return &epochProducer{role: role, token: token, slot: make(chan struct{}, 1), ctx: ctx, cancel: cancel,
		sequences: make(map[TopicPartition]int32)}
}

// close ends the epoch's producer for good and records why, the first time
// only, and returns the reason that stands. The reason wraps ErrFenced
// when the broker refused the token, ErrNotAuthorized (and
// ErrProducerLost) when the cluster refused the transactional id, and
// ErrProducerLost otherwise: only a refusal of the token means that the
// role went elsewhere. Closing fails the requests in flight of the epoch at
// once, so a transaction that runs under it ends promptly.
func (p *epochProducer) close(reason error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closeErr != nil {
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
	p.closeErr = reason
	p.cancel()
	return reason
}

// closed returns why the producer was closed, and nil while it is open.
func (p *epochProducer) closed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closeErr
}

// AcquireEpoch mints a new epoch of the role and fences every earlier one,
// this transport's own included. It ends the producer of the role's
// previous mint in this transport, and sends InitProducerId with
// transactional.id = the role name and the lease duration as transaction
// timeout to the role's transaction coordinator, so every call mints: the
// coordinator bumps the epoch of the id, or allocates a new producer id
// when the epoch is exhausted, and aborts an open transaction of the
// previous holder. The request goes through the transactional client that
// every role of the transport shares.
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

	token, err := t.initProducerID(ctx, role)
	if err != nil {
		return NoEpoch, err
	}
	producer := newEpochProducer(role, token)

	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		producer.close(errTransportClosed)
		return NoEpoch, errTransportClosed
	}
	t.current[role] = producer
	t.minted[token] = producer
	return token, nil
}

// warmTimeout bounds the request that warms the route to a role's
// transaction coordinator.
const warmTimeout = 5 * time.Second

// prewarm makes the shared transactional client learn the transaction
// coordinator of role and the leader of the role's partition of the state
// topic, once, when this transport appends a registration of the role: the
// member campaigns, and may challenge, and its mint and first lease then
// skip FindCoordinator and Metadata (two round trips of a handover). The
// warm-up runs in the background and writes nothing: one FindCoordinator
// of the role, whose answer the transport keeps (txnCoordinators), and the
// Metadata of the state topic when the transport has not loaded it yet. It takes no epoch, and a
// failure only leaves the route cold. A deregistration forgets that the
// role was warmed, so that its next registration warms it again.
func (t *KafkaTransport) prewarm(role Role, partition TopicPartition) {
	t.mu.Lock()
	if t.closed || t.warmed[role] {
		t.mu.Unlock()
		return
	}
	t.warmed[role] = true
	t.background.Add(1) // under mu, so that Close, which sets closed under mu, waits for it
	t.mu.Unlock()
	go func() {
		defer t.background.Done()
		ctx, cancel := context.WithTimeout(t.ctx, warmTimeout)
		defer cancel()
		_, _ = t.coords.node(ctx, role.String())
		_, _ = t.leaders.leader(ctx, partition, false)
	}()
}

// dropWarm forgets the warm-up of role, after the member deregistered.
func (t *KafkaTransport) dropWarm(role Role) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.warmed, role)
}

// initProducerID sends InitProducerId for role until the coordinator mints,
// refuses for good, or ctx ends.
func (t *KafkaTransport) initProducerID(ctx context.Context, role Role) (FencingToken, error) {
	txnID := role.String()
	backoff := 50 * time.Millisecond
	for {
		var id int64
		var epoch int16
		err := withConcurrentTransactions(ctx, func() error {
			kresp, err := t.coords.request(ctx, txnID, func() kmsg.Request {
				req := kmsg.NewPtrInitProducerIDRequest()
				req.TransactionalID = &txnID
				req.TransactionTimeoutMillis = int32(t.lease.Duration().Milliseconds())
				req.ProducerID, req.ProducerEpoch = -1, -1
				return req
			}, func(resp kmsg.Response) error {
				return kerr.ErrorForCode(resp.(*kmsg.InitProducerIDResponse).ErrorCode)
			})
			if err != nil {
				return err
			}
			resp := kresp.(*kmsg.InitProducerIDResponse)
			id, epoch = resp.ProducerID, resp.ProducerEpoch
			return nil
		})
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
	txn, err := t.describeTransaction(ctx, role.String())
	if err != nil {
		return NoEpoch, false, describeKafkaError(op, err)
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
