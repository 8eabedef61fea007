package coordination

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// KafkaTransport implements [Transport], [GuardedWriter],
// [PartitionFollower] and [StableOffsetReporter] with franz-go.
//
// A transport stands for one member process, and it owns these clients:
//
//   - one plain producer for [KafkaTransport.Append]: idempotent, acks=all,
//     no linger, and a partitioner that keeps the partition the caller
//     pinned;
//   - one transactional producer for each epoch that
//     [KafkaTransport.AcquireEpoch] mints, with transactional.id = the role
//     name and transaction.timeout.ms = the lease duration. Lease writes and
//     guarded writes of the role go through it, one transaction at a time;
//   - one read_committed reader that follows, for the life of the
//     transport, every partition that a read or a watch asked for.
//
// # The token stays the minted pair
//
// Kafka 4 with transaction.version=2 (KIP-890 part 2) bumps the producer
// epoch at every EndTxn of version 5 or later, so the token of a holder would
// change at every renewal. The transactional producers of this transport
// therefore cap EndTxn at version 4 and Produce at version 11. The
// coordinator picks the behaviour from the request version, so a
// transaction of this transport keeps the epoch, and the token that
// AcquireEpoch returned is the pair that every lease record of the
// leadership carries and that [KafkaTransport.DescribeEpoch] reports. After
// every commit the transport compares the producer id and epoch of the
// client with the token. A pair that moved ends the epoch: the transport
// closes the client, and the write returns an error that wraps [ErrFenced].
// It never adopts a pair it did not mint.
//
// A port over a client that cannot cap request versions cannot keep the
// token fixed on such a cluster: every commit hands its producer a new
// epoch. It must adopt the pair that each of its own commits returns (the
// one case where adopting is right, because the coordinator bumped the
// epoch for this producer), carry it in the next lease record, and accept
// that a third party's DescribeLeadership sees the lease's token one commit
// behind; or the operator keeps the cluster at transaction.version=1.
//
// # Fences
//
// Broker codes 47 INVALID_PRODUCER_EPOCH, 90 PRODUCER_FENCED and 49
// INVALID_PRODUCER_ID_MAPPING, and a producer id or epoch that moved under
// the client, end the epoch: the transport closes its transactional client
// and never reuses it, because franz-go would otherwise recover by calling
// InitProducerId again, which can mint a new epoch for a deposed member.
// Every later write under that token returns an error that wraps
// [ErrFenced] without a request.
//
// A transaction that leaves the client in a state that only a new
// InitProducerId repairs ends the epoch too, but it is no fence, and the
// error wraps [ErrProducerLost] instead: a commit that failed with its
// outcome unknown (the error says so: its records may be in the log), an
// abort that failed, a lost connection that franz-go keeps as the failure of
// its producer id (it reports it from the next BeginTransaction, before
// anything is written), 59 UNKNOWN_PRODUCER_ID, a closed transport. The
// transport then ends the open transaction itself, with an EndTxn(abort) at
// the token's epoch, so it does not hide the partition's newer records until
// the transaction timeout. A write whose commit succeeded reports success,
// even when the check of the pair after it fails; the next write then fails.
//
// A write that fails for a transient reason (a coordinator that moved,
// NOT_ENOUGH_REPLICAS, a lost connection, the end of its context before the
// commit) aborts its transaction, so the partition's last stable offset moves
// on, and keeps the token: the next write under it may succeed.
//
// # Open transactions hide records
//
// A read_committed reader stops at the last stable offset, the first offset
// of the oldest open transaction of the partition. Roles that share a
// partition therefore share its stalls: an open lease transaction of one
// role hides the newer records of every role on the partition until it
// commits or is aborted. The transport keeps its transactions short (one
// record for a lease, no linger), aborts a transaction that failed, and
// passes the lease duration as the transaction timeout, so the coordinator
// aborts the transaction of a holder that stalled or died within a lease
// duration plus one sweep of its abort timer, whose period is the broker
// setting transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s
// by default). Until then a standby of another role on the partition sees
// that role's lease age. [KafkaTransport.StableOffsets] tells a reader
// whether its view of a partition is incomplete, so that it can wait rather
// than challenge on it.
//
// A KafkaTransport is safe for concurrent use by the leaderships of several
// roles. The writes of one epoch run one at a time. Close releases
// everything.
type KafkaTransport struct {
	lease       LeaseConfig
	baseOptions []kgo.Opt          // seeds and the caller's options, shared by every client
	versions    *kversion.Versions // the request versions of the transactional clients

	plain  *kgo.Client  // registrations, and the admin requests
	admin  *kadm.Client // over plain
	reader *kafkaReader

	mu          sync.Mutex
	closed      bool
	current     map[Role]*epochProducer         // the newest mint of each role
	minted      map[FencingToken]*epochProducer // every mint of this transport
	minting     map[Role]*sync.Mutex            // serialises AcquireEpoch per role
	stateTopics map[string]bool                 // topics of Append, WriteLease and the reads
	warm        map[Role]*warmClient            // clients opened ahead of a mint
	closeOnce   sync.Once

	// closers are the franz-go clients being closed in the background: a
	// franz-go Close waits up to a second for requests in flight, which a
	// call bounded by its context cannot wait for. Close waits for them
	// at most closeBound.
	closers sync.WaitGroup
}

var (
	_ Transport            = (*KafkaTransport)(nil)
	_ GuardedWriter        = (*KafkaTransport)(nil)
	_ PartitionFollower    = (*KafkaTransport)(nil)
	_ StableOffsetReporter = (*KafkaTransport)(nil)
	_ MintRecorder         = (*KafkaTransport)(nil)
)

// abortTimeout bounds the EndTxn(abort) after a failed write.
const abortTimeout = 10 * time.Second

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

// NewKafkaTransport connects a coordination transport to brokers, a list of
// host:port seed addresses of one cluster. The lease duration becomes the
// transaction timeout of every role, so it must not exceed the broker's
// transaction.max.timeout.ms (15 minutes by default).
//
// The lease policy is also the default of every [AcquireLeadership] over
// this transport: a call with no timing option takes it, so the transaction
// timeout and the lease agree. A call whose options give another lease
// duration is logged, because a transaction timeout longer than the lease
// lets a stalled holder hide its partition longer than a lease.
//
// The call opens no connection; the first request does. It returns an error
// for the zero LeaseConfig and for an empty broker list. Use
// [NewKafkaTransportWithOptions] for TLS, SASL and other client settings.
func NewKafkaTransport(lease LeaseConfig, brokers ...string) (*KafkaTransport, error) {
	return NewKafkaTransportWithOptions(lease, nil, brokers...)
}

// NewKafkaTransportWithOptions is [NewKafkaTransport] with franz-go client
// options, such as kgo.DialTLSConfig, kgo.SASL, kgo.ClientID, kgo.WithLogger,
// kgo.WithHooks, kgo.RequestTimeoutOverhead or kgo.MaxVersions. Every client
// of the transport takes them.
//
// Pass connection settings only. The transport sets, before the options, a
// metadata minimum age of 500 ms (franz-go's default is 5 s), so that a
// client learns the new leaders soon after a broker fault; an option may
// override it. The transport sets, after the options,
// what its correctness rests on: the seed brokers, acks=all, no linger, a
// partitioner that keeps the caller's partition, and for the transactional
// clients the transactional id, the transaction timeout, and the version cap
// of EndTxn and Produce described on [KafkaTransport]. It returns an error
// for options that kgo rejects, and for options that disable idempotent
// writes or name a transactional id, because those break the transactions.
func NewKafkaTransportWithOptions(lease LeaseConfig, clientOptions []kgo.Opt, brokers ...string) (*KafkaTransport, error) {
	if lease == (LeaseConfig{}) {
		return nil, errors.New("coordination: NewKafkaTransport: zero LeaseConfig: build it with NewLeaseConfig or DefaultLeaseConfig")
	}
	if len(brokers) == 0 {
		return nil, errors.New("coordination: NewKafkaTransport: no brokers: pass at least one host:port")
	}
	for i, broker := range brokers {
		if broker == "" {
			return nil, fmt.Errorf("coordination: NewKafkaTransport: broker %d is empty", i)
		}
	}
	// The caller's options come after the transport's defaults, so that
	// they override them.
	base := append([]kgo.Opt{kgo.MetadataMinAge(metadataMinAge)}, clientOptions...)
	base = append(base, kgo.SeedBrokers(brokers...))

	plain, err := kgo.NewClient(append(slices.Clone(base),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)...)
	if err != nil {
		return nil, fmt.Errorf("coordination: NewKafkaTransport: %w", err)
	}
	if disabled, _ := plain.OptValue(kgo.DisableIdempotentWrite).(bool); disabled {
		plain.Close()
		return nil, errors.New("coordination: NewKafkaTransport: the client options disable idempotent writes, which transactions need")
	}
	if values := plain.OptValues(kgo.TransactionalID); len(values) == 2 {
		if set, _ := values[1].(bool); set {
			plain.Close()
			return nil, errors.New("coordination: NewKafkaTransport: the client options name a transactional id; the transport sets one per role")
		}
	}
	versions := leaseVersions(plain)

	// The reader's client also sends the raw EndTxn(abort) of abortOpen, so
	// it takes the capped versions: an EndTxn of version 5 would bump the
	// epoch.
	readerClient, err := kgo.NewClient(append(slices.Clone(base), kgo.MaxVersions(versions))...)
	if err != nil {
		plain.Close()
		return nil, fmt.Errorf("coordination: NewKafkaTransport: %w", err)
	}
	return &KafkaTransport{
		lease:       lease,
		baseOptions: base,
		versions:    versions,
		plain:       plain,
		admin:       kadm.NewClient(plain),
		reader:      newKafkaReader(readerClient, lease),
		current:     make(map[Role]*epochProducer),
		minted:      make(map[FencingToken]*epochProducer),
		minting:     make(map[Role]*sync.Mutex),
		stateTopics: make(map[string]bool),
		warm:        make(map[Role]*warmClient),
	}, nil
}

// leaseVersions returns the request versions of the transactional clients:
// the versions the caller allowed (kversion.Stable by default), with EndTxn
// capped at 4 and Produce at 11. franz-go opts into KIP-890 part 2 only when
// the cap allows EndTxn 5, Produce 12 and TxnOffsetCommit 5, so the cap also
// keeps its explicit AddPartitionsToTxn and its transaction.version 1
// recovery rules.
func leaseVersions(plain *kgo.Client) *kversion.Versions {
	base, _ := plain.OptValue(kgo.MaxVersions).(*kversion.Versions)
	if base == nil {
		base = kversion.Stable()
	}
	versions := new(kversion.Versions)
	base.EachMaxKeyVersion(func(key, version int16) { versions.SetMaxKeyVersion(key, version) })
	capVersion := func(key kmsg.Key, limit int16) {
		if v, ok := versions.LookupMaxKeyVersion(key.Int16()); ok && v > limit {
			versions.SetMaxKeyVersion(key.Int16(), limit)
		}
	}
	capVersion(kmsg.EndTxn, 4)
	capVersion(kmsg.Produce, 11)
	return versions
}

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

// Append appends one record to the partition with the plain idempotent
// producer, outside any transaction, and returns when the leader and its
// in-sync replicas have it (acks=all). The record goes to the partition
// given, and a nil or empty value goes out as a null value, a tombstone that
// the log cleaner removes after delete.retention.ms.
//
// It retries what franz-go retries (a lost connection, a leader that moved,
// NOT_ENOUGH_REPLICAS) until ctx ends, and returns at most 250 ms
// (abandonGrace) after that, with an error that says whether the record may
// still be appended; it returns a permanent error for a missing WRITE ACL
// on the topic. It refuses a key that decodes as a lease key, and sends
// nothing: a lease outside a transaction under the role's epoch would let
// an unfenced writer fake one. It is safe for concurrent use.
func (t *KafkaTransport) Append(ctx context.Context, partition TopicPartition, key, value []byte) error {
	if err := t.useStateTopic(partition); err != nil {
		return err
	}
	if t.isClosed() {
		return errTransportClosed
	}
	if decoded, err := DecodeKey(key); err == nil && decoded.Kind == KindLease {
		return fmt.Errorf("coordination: append to %s: the lease key of role %s: a lease is written with WriteLease, "+
			"in a transaction under the role's epoch, never appended outside one, where no fence guards it", partition, decoded.Role)
	}
	if decoded, err := DecodeKey(key); err == nil && decoded.Kind == KindRegistration {
		// The registration of a candidate: open the client of its next mint
		// now, so that a challenge pays no connection setup. A
		// deregistration closes it.
		if IsTombstone(value) {
			t.dropWarm(decoded.Role)
		} else {
			t.prewarm(decoded.Role)
		}
	}
	record := &kgo.Record{Topic: partition.Topic, Partition: int32(partition.Partition), Key: key, Value: tombstoneAsNull(value)}
	if err := t.produceBounded(ctx, record); err != nil {
		return describeKafkaError("append to "+partition.String(), err)
	}
	return nil
}

// produceBounded produces one record with the plain producer and waits for
// its acknowledgement, for the end of ctx, or for abandonGrace after it,
// whichever comes first. franz-go fails a record whose context ends before
// it was sent, but an idempotent producer cannot take back a record in
// flight, so a call that must return within its context stops waiting for
// it: the error then says that the outcome is unknown. The record's
// callback runs later on franz-go's goroutine, into a buffered channel.
func (t *KafkaTransport) produceBounded(ctx context.Context, record *kgo.Record) error {
	done := make(chan error, 1)
	t.plain.Produce(ctx, record, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	grace := time.NewTimer(abandonGrace)
	defer grace.Stop()
	select {
	case err := <-done:
		return err
	case <-grace.C:
		return fmt.Errorf("the call's context ended (%w) with the record in flight; its outcome is unknown, and it may still be appended", ctx.Err())
	}
}

// WriteLease writes one record to the partition in a transaction of the
// producer that minted token, and returns after the commit. A nil or empty
// value goes out as a null value, which clears the lease and which the log
// cleaner removes.
//
// The token must be the newest epoch that this transport minted for its
// role. An older token, a token of another transport, a token whose client
// the transport closed after a fence, and a producer epoch that moved at the
// commit all give an error that wraps [ErrFenced], and the first three send
// no request. A key that decodes as the key of another role than the
// token's is refused. A write that fails for a transient reason aborts its
// transaction and returns an error that does not wrap ErrFenced.
//
// ctx bounds the write, the wait for a write in flight of the same token
// included, and the call returns at most 250 ms (abandonGrace) after ctx
// ends. A transaction still in flight then is abandoned: the error wraps
// [ErrProducerLost] and says that the outcome is unknown, and the transport
// closes the token's producer, because an EndTxn abandoned midway leaves an
// outcome that only a new epoch resolves. A write that gave up while it
// waited for the token's previous transaction wrote nothing and leaves the
// producer alone. Writes under one token run one at a time.
func (t *KafkaTransport) WriteLease(ctx context.Context, partition TopicPartition, token FencingToken, key, value []byte) error {
	if err := t.useStateTopic(partition); err != nil {
		return err
	}
	producer, err := t.producer("lease write", token)
	if err != nil {
		return err
	}
	if decoded, err := DecodeKey(key); err == nil && decoded.Role != producer.role {
		return fmt.Errorf("coordination: lease write under %s: the key belongs to role %s, the token to role %s", token, decoded.Role, producer.role)
	}
	record := &kgo.Record{Topic: partition.Topic, Partition: int32(partition.Partition), Key: key, Value: tombstoneAsNull(value)}
	return t.transact(ctx, producer, fmt.Sprintf("lease write of role %s to %s under %s", producer.role, partition, token), record)
}

// WriteGuarded writes the caller's records in one transaction of the
// producer that minted token, and returns after the commit: a read_committed
// reader sees all of them or none, and they are on the in-sync replicas of
// their partitions (acks=all). Each record goes to the partition it names.
//
// The token rules and the errors are those of [KafkaTransport.WriteLease]:
// a deposed leader's write fails with an error that wraps [ErrFenced], and
// then none of its records becomes visible. It refuses a record without a
// topic, with a negative partition, or for a topic that this transport uses
// as a state topic (StateTopic, or any topic of its lease writes,
// registrations and reads). An empty list checks the token and writes
// nothing. It runs one at a time with the lease writes of the token.
func (t *KafkaTransport) WriteGuarded(ctx context.Context, token FencingToken, records []GuardedRecord) error {
	out := make([]*kgo.Record, 0, len(records))
	t.mu.Lock()
	for i, r := range records {
		var refuse string
		switch {
		case r.Topic == "":
			refuse = "has no topic"
		case r.Partition < 0:
			refuse = fmt.Sprintf("has the negative partition %d", r.Partition)
		case r.Topic == StateTopic || t.stateTopics[r.Topic]:
			refuse = fmt.Sprintf("is for the state topic %s, which holds only registrations and leases", r.Topic)
		}
		if refuse != "" {
			t.mu.Unlock()
			return fmt.Errorf("coordination: guarded write under %s: record %d %s", token, i, refuse)
		}
		out = append(out, &kgo.Record{Topic: r.Topic, Partition: int32(r.Partition), Key: r.Key, Value: r.Value, Headers: kafkaHeaders(r.Headers)})
	}
	t.mu.Unlock()
	producer, err := t.producer("guarded write", token)
	if err != nil {
		return err
	}
	if len(out) == 0 {
		return producer.closed()
	}
	return t.transact(ctx, producer, fmt.Sprintf("guarded write of role %s under %s", producer.role, token), out...)
}

// LeaseConfig returns the lease policy the transport was built with: its
// duration is the transaction timeout of every role, and [AcquireLeadership]
// takes the policy as its default.
func (t *KafkaTransport) LeaseConfig() LeaseConfig { return t.lease }

// producer returns the transactional client that minted token, or an error
// that wraps ErrFenced for a token this transport did not mint (or minted
// over), and ErrProducerLost on a closed transport.
func (t *KafkaTransport) producer(what string, token FencingToken) (*epochProducer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, fmt.Errorf("coordination: %s under %s: %w: %w", what, token, errTransportClosed, ErrProducerLost)
	}
	producer := t.minted[token]
	if producer == nil {
		return nil, fmt.Errorf("coordination: %s under %s: this transport did not mint the token, and writes only under its own: %w", what, token, ErrFenced)
	}
	return producer, nil
}

// transact writes records in one transaction of producer, and classifies
// what goes wrong. See KafkaTransport for the rules.
//
// franz-go recovers a failed producer id by calling InitProducerId again,
// from BeginTransaction, from a produce, or from EndTransaction. That mints
// a new epoch: on Kafka only for the member that holds the newest one (the
// coordinator refuses a stale epoch with PRODUCER_FENCED), on kfake for any
// member. The transport cannot stop franz-go from sending it, so it closes
// the client before one can happen where it can tell (after a fence, after
// an abort that left the producer id failed), and it checks the request
// counter after every step where one can happen: after BeginTransaction,
// before any record went out, so such a write writes nothing; after the
// produce, before the commit, so it aborts; and after the commit.
func (t *KafkaTransport) transact(ctx context.Context, producer *epochProducer, op string, records ...*kgo.Record) error {
	if err := producer.closed(); err != nil {
		return wrapf(err, nil, "%s", op)
	}
	select {
	case producer.slot <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("coordination: %s: waited for the transaction in flight of the same epoch, nothing written: %w", op, ctx.Err())
	}
	done := make(chan error, 1)
	go func() { // owned by this call, or by the producer once the call gives up; it ends with the transaction
		defer func() { <-producer.slot }()
		done <- t.transactHeld(ctx, producer, op, records)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	grace := time.NewTimer(abandonGrace)
	defer grace.Stop()
	select {
	case err := <-done:
		return err
	case <-grace.C:
	}
	return producer.close(fmt.Errorf("coordination: %s: the call's context ended (%w) with the transaction in flight, which did not end within %v more; "+
		"its outcome is unknown, so the records may be in the log; the transport ends the epoch's producer, because only a new epoch repairs it: %w",
		op, ctx.Err(), abandonGrace, ErrProducerLost))
}

// abandonGrace bounds how long a write waits for its transaction after the
// caller's context ended: a commit in flight often ends within it. Past it,
// the write returns an error that wraps [ErrProducerLost] (outcome unknown)
// and the transport closes the epoch's producer, whose transaction then
// fails at once. Every write of the transport therefore returns within its
// context plus this bound.
const abandonGrace = 250 * time.Millisecond

// transactHeld runs one transaction. The caller holds producer.slot.
func (t *KafkaTransport) transactHeld(ctx context.Context, producer *epochProducer, op string, records []*kgo.Record) error {
	producer.mu.Lock()
	client := producer.client
	closeErr := producer.closeErr
	producer.mu.Unlock()
	switch {
	case client == nil:
		return fmt.Errorf("coordination: %s: %w", op, closeErr)
	case producer.reinitialised():
		return producer.close(fmt.Errorf("coordination: %s: franz-go re-initialised the producer id since the mint: %w", op, errEpochMoved))
	}
	if err := ctx.Err(); err != nil {
		return wrapf(err, nil, "%s", op)
	}

	if err := client.BeginTransaction(); err != nil {
		// The producer id of a usable client carries no error, so a refusal
		// here means the client cannot go on without a new InitProducerId.
		if kafkaFailureOf(err) == failureFenced {
			return producer.close(t.fenceError(producer, op, err))
		}
		return producer.close(wrapf(err, []error{ErrProducerLost}, "%s: begin transaction, nothing written", op))
	}
	if producer.reinitialised() {
		// Nothing went out under the new epoch; the transaction is empty.
		return producer.close(fmt.Errorf("coordination: %s: franz-go re-initialised the producer id to begin the transaction: %w", op, errEpochMoved))
	}
	results := client.ProduceSync(ctx, records...)
	var failures []error
	for _, result := range results {
		if result.Err != nil {
			failures = append(failures, recordError(result.Record, result.Err))
		}
	}
	if len(failures) > 0 {
		return t.failed(client, producer, op, failures)
	}
	if producer.reinitialised() {
		return t.failed(client, producer, op, []error{fmt.Errorf("franz-go re-initialised the producer id during the produce: %w", errEpochMoved)})
	}

	// The caller's deadline no longer applies: a commit abandoned midway has
	// an outcome that only a new epoch resolves.
	commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.lease.Duration())
	defer cancel()
	if err := client.EndTransaction(commitCtx, kgo.TryCommit); err != nil {
		switch {
		case kafkaFailureOf(err) == failureFenced:
			return producer.close(t.fenceError(producer, op, err))
		case kafkaFailureOf(err) == failureDenied:
			// The coordinator refused the EndTxn: nothing committed.
			err = producer.close(describeKafkaError(op+", nothing committed", err))
			t.abortOpen(producer)
			return err
		case errors.Is(err, kerr.TransactionAbortable):
			return t.failed(client, producer, op, []error{err})
		default:
			err = producer.close(fmt.Errorf("coordination: %s: the commit failed and its outcome is unknown, so the records may be in the log; "+
				"the transport closes the producer, because only a new epoch repairs it: %w: %w", op, ErrProducerLost, err))
			t.abortOpen(producer)
			return err
		}
	}

	// The commit succeeded: the records are in the log under the token, so
	// this write reports success whatever the checks below find. A pair that
	// moved, or a producer id that cannot be read, closes the producer, and
	// the next write under the token fails.
	if producer.reinitialised() {
		producer.close(fmt.Errorf("coordination: %s: franz-go re-initialised the producer id to commit: %w", op, errEpochMoved))
		return nil
	}
	id, epoch, err := client.ProducerID(commitCtx)
	switch {
	case err != nil:
		producer.close(wrapf(err, []error{ErrProducerLost}, "%s: read the producer id after the commit", op))
	case id != producer.token.ProducerID() || epoch != producer.token.ProducerEpoch():
		producer.close(fmt.Errorf("coordination: %s: producer epoch moved from %s to %d:%d at the commit; "+
			"the transport never adopts a pair it did not mint: %w", op, producer.token, id, epoch, errEpochMoved))
	}
	return nil
}

// failed handles the errors of a transaction before its commit. A fence
// closes the client. Any other error aborts the transaction and keeps the
// client, unless the abort fails, franz-go re-initialised the producer id to
// abort, or the producer id may be left failed: franz-go then aborts without
// an EndTxn, and would recover at the next BeginTransaction with a new
// InitProducerId. The caller holds producer.slot.
func (t *KafkaTransport) failed(client *kgo.Client, producer *epochProducer, op string, causes []error) error {
	cause := errors.Join(causes...)
	if len(causes) == 1 {
		cause = causes[0]
	}
	switch {
	case kafkaFailureOf(cause) == failureFenced:
		return producer.close(t.fenceError(producer, op, cause))
	case errors.Is(cause, kerr.TransactionalIDAuthorizationFailed), errors.Is(cause, kerr.ClusterAuthorizationFailed):
		// The member may no longer use the role's transactional id: no
		// write under the token can land until an operator grants it.
		err := producer.close(describeKafkaError(op+", nothing committed", cause))
		t.abortOpen(producer)
		return err
	}
	endTxns := producer.requests.endTxns.Load()
	ctx, cancel := context.WithTimeout(context.Background(), min(abortTimeout, t.lease.Duration()))
	defer cancel()
	if err := client.EndTransaction(ctx, kgo.TryAbort); err != nil {
		if kafkaFailureOf(err) == failureFenced {
			return producer.close(t.fenceError(producer, op, errors.Join(cause, err)))
		}
		err = producer.close(fmt.Errorf("coordination: %s, nothing committed: %w; the abort failed too, so the transport closes the producer: %w: %w", op, cause, ErrProducerLost, err))
		t.abortOpen(producer)
		return err
	}
	if producer.reinitialised() {
		return producer.close(fmt.Errorf("coordination: %s: %w; franz-go re-initialised the producer id to abort the transaction: %w", op, cause, errEpochMoved))
	}
	if producer.requests.endTxns.Load() == endTxns {
		for _, c := range causes {
			if !unsentRecordError(c) {
				err := producer.close(fmt.Errorf("coordination: %s, nothing committed: %w; franz-go may hold the producer id as failed, "+
					"and would mint a new epoch to recover it, so the transport closes the producer: %w", op, cause, ErrProducerLost))
				t.abortOpen(producer)
				return err
			}
		}
	}
	return describeKafkaError(op+" (aborted)", cause)
}

// fenceError describes a refusal of the token. The transaction coordinator
// refuses a token for two reasons: another member minted a newer epoch (a
// fence: the error wraps [ErrFenced]), or the coordinator itself aborted a
// transaction of the token that outlived transaction.timeout.ms and bumped
// the epoch so that the stalled producer cannot go on. Nobody else holds
// the role in the second case, so the error says so and wraps
// [ErrProducerLost] instead; the leadership ends either way, because no
// write under the token can land again. It tells the two apart with one
// DescribeTransactions request (bounded by fenceDescribeTimeout): the
// coordinator's pair is the token's producer id at the next epoch, the
// transaction is aborting or aborted, and it started at least a
// transaction timeout ago. A challenger's InitProducerId leaves an Empty
// transaction instead, at the next epoch or the one after. The caller
// holds producer.slot.
func (t *KafkaTransport) fenceError(producer *epochProducer, op string, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), fenceDescribeTimeout)
	defer cancel()
	role := producer.role.String()
	described, derr := t.admin.DescribeTransactions(ctx, role)
	if txn, ok := described[role]; derr == nil && ok && txn.Err == nil && abortedAtTimeout(producer.token, txn, time.Now().UnixMilli()) {
		return fmt.Errorf("coordination: %s: the transaction coordinator aborted the transaction of %s at its timeout "+
			"(transaction.timeout.ms %d, which the transport sets to the lease duration) and bumped the epoch to %d:%d; "+
			"no other member minted, but no write under %s can land again: %w: %w",
			op, producer.token, txn.TimeoutMillis, txn.ProducerID, txn.ProducerEpoch, producer.token, ErrProducerLost, err)
	}
	return describeKafkaError(op, err)
}

// fenceDescribeTimeout bounds the DescribeTransactions of fenceError.
const fenceDescribeTimeout = time.Second

// abortedAtTimeout reports whether a described transaction shows the
// coordinator's own abort of token's transaction at its timeout. See
// fenceError.
func abortedAtTimeout(token FencingToken, txn kadm.DescribedTransaction, nowMillis int64) bool {
	if txn.ProducerID != token.ProducerID() || int(txn.ProducerEpoch) != int(token.ProducerEpoch())+1 {
		return false
	}
	if txn.State != "PrepareAbort" && txn.State != "CompleteAbort" {
		return false
	}
	return txn.StartTimestamp > 0 && txn.TimeoutMillis > 0 && nowMillis-txn.StartTimestamp >= int64(txn.TimeoutMillis)
}

// abortOpen ends, as far as it can, a transaction that a closed producer may
// have left open, so that it does not hide the newer records of its
// partitions until the coordinator aborts it at the transaction timeout. It
// sends a raw EndTxn(abort) at the token's own epoch, version 4: an abort
// can mint no epoch, and the coordinator refuses it when the token is stale
// or no transaction is open. The outcome does not matter to the caller.
// The caller holds producer.slot.
func (t *KafkaTransport) abortOpen(producer *epochProducer) {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = producer.role.String()
	req.ProducerID = producer.token.ProducerID()
	req.ProducerEpoch = producer.token.ProducerEpoch()
	req.Commit = false
	ctx, cancel := context.WithTimeout(context.Background(), min(abortTimeout, t.lease.Duration()))
	defer cancel()
	_, _ = t.reader.client.Request(ctx, req)
}

// recordError names the topic of a record that the broker refused, and for
// a refused topic the ACL that the member lacks. It wraps err.
func recordError(record *kgo.Record, err error) error {
	if errors.Is(err, kerr.TopicAuthorizationFailed) {
		return fmt.Errorf("the member may not write topic %s (it needs WRITE on Topic:%s): %w", record.Topic, record.Topic, err)
	}
	return fmt.Errorf("record for %s: %w", record.Topic, err)
}

// unsentRecordError reports an error with which franz-go fails a record
// without touching its producer id: the end of the record's context, a
// record timeout, a topic that does not exist or that the member may not
// see, a record too large. Every other broker code on a record may come from
// a failed producer id.
func unsentRecordError(err error) bool {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return true
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.MessageTooLarge, kerr.RecordListTooLarge,
		kerr.InvalidTopicException, kerr.TopicAuthorizationFailed:
		return true
	}
	return false
}

// useStateTopic checks a partition of the state topic and remembers its
// topic, so that WriteGuarded refuses it.
func (t *KafkaTransport) useStateTopic(partition TopicPartition) error {
	if err := checkTopicPartition(partition); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stateTopics[partition.Topic] = true
	return nil
}

// checkTopicPartition rejects a partition that Kafka has no name for.
func checkTopicPartition(partition TopicPartition) error {
	switch {
	case partition.Topic == "":
		return errors.New("coordination: empty topic name")
	case partition.Partition < 0 || partition.Partition > 1<<31-1:
		return fmt.Errorf("coordination: partition %d of topic %s is out of range", partition.Partition, partition.Topic)
	}
	return nil
}

// tombstoneAsNull sends an empty value as a null value: only a null value is
// a tombstone to the log cleaner.
func tombstoneAsNull(value []byte) []byte {
	if IsTombstone(value) {
		return nil
	}
	return value
}

// Minted reports whether this transport minted token, and implements
// [MintRecorder]. It is safe for concurrent use.
func (t *KafkaTransport) Minted(token FencingToken) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.minted[token] != nil
}

// isClosed reports whether Close ran.
func (t *KafkaTransport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// Close closes every client of the transport and ends its reader: the
// transactional producers, the plain producer and the reader's client. A
// transaction in flight fails at once; its write returns an error that
// wraps [ErrProducerLost]. Every later call returns an error, and every
// write under a token of this transport an error that wraps
// [ErrProducerLost]: the epoch's producer is gone, though no other member
// fenced it. Close is idempotent and safe for concurrent use.
//
// Close returns within 500 ms (closeBound). franz-go's own Close of a
// client waits up to a second for requests in flight to a silent broker;
// such a client finishes closing in the background, on a goroutine of the
// transport, and sends nothing more.
//
// Close takes no epoch back: a resigned member's epoch stays the newest
// until another member mints one.
func (t *KafkaTransport) Close() {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		producers := make([]*epochProducer, 0, len(t.minted))
		for _, p := range t.minted {
			producers = append(producers, p)
		}
		warm := t.warm
		t.warm = make(map[Role]*warmClient)
		t.mu.Unlock()
		for _, w := range warm {
			w.cancel()
			t.closers.Go(w.client.Close)
		}
		for _, p := range producers {
			p.close(fmt.Errorf("coordination: token %s of role %s: %w", p.token, p.role, errTransportClosed))
		}
		t.closers.Go(t.reader.close)
		t.closers.Go(t.plain.Close)
	})
	closed := make(chan struct{})
	go func() { // ends when the last client has closed
		t.closers.Wait()
		close(closed)
	}()
	bound := time.NewTimer(closeBound)
	defer bound.Stop()
	select {
	case <-closed:
	case <-bound.C:
	}
}

// closeBound bounds how long [KafkaTransport.Close] waits for franz-go to
// close the transport's clients.
const closeBound = 500 * time.Millisecond
