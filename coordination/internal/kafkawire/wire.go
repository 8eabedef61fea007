package kafkawire

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

// This file holds the Wire, the franz-go clients of one member process and
// what they share: their options, the version cap that keeps an epoch
// fixed, the registry of minted epochs, and Close.

// Config is what [New] builds the clients of a Wire from.
type Config struct {
	// Brokers are the host:port seed addresses of one cluster.
	Brokers []string
	// Options are the caller's franz-go options (TLS, SASL, logging,
	// hooks, MaxVersions): connection settings, which every client takes.
	Options []kgo.Opt
	// TxnTimeout is the transaction.timeout.ms of every transactional id,
	// and the bound of a transaction's background work: the lease
	// duration.
	TxnTimeout time.Duration
	// RenewInterval bounds a request without a timeout of its own
	// ([RequestTimeoutOverhead]); with TxnTimeout it sets the long poll of
	// the reader (readerTimings, in reader.go).
	RenewInterval time.Duration
	// KeyGroup maps a record key to its group, for the reader's
	// selections (selection.go); nil makes every view of the reader keep
	// the whole partition.
	KeyGroup KeyGroup
}

// Wire is the Kafka side of one member process: three franz-go clients,
// whatever the number of transactional ids it writes under.
//
//   - plain, an idempotent producer with acks=all, no linger and a
//     partitioner that keeps the caller's partition: [Wire.Append], and
//     the admin requests (after a fatal answer to its InitProducerId,
//     the appends go to a new producer of the same options: append.go);
//   - txn, the client of every transactional id, with EndTxn capped at
//     version 4, Produce at 11 and AddPartitionsToTxn at 3, so that a
//     commit keeps the epoch (KIP-890 part 2 bumps it from EndTxn 5 on):
//     the raw InitProducerId, AddPartitionsToTxn, Produce and EndTxn of
//     every epoch, one transaction at a time per epoch;
//   - the reader's client, which long-polls every followed partition
//     (see [Reader]).
//
// It is safe for concurrent use. Close releases everything.
type Wire struct {
	config Config

	txnTimeoutMillis int32 // config.TxnTimeout, checked in New: InitProducerId's TransactionTimeoutMillis

	versions        *kversion.Versions // the versions the caller's options allow: the base of the capped ones (versions.go)
	versionsChecked atomic.Bool        // CheckVersions passed

	plain   *kgo.Client      // the admin requests, and the registrations until a rebuild (append.go)
	admin   *kadm.Client     // over plain
	txn     *kgo.Client      // the transactions of every transactional id, with the capped versions
	leaders *leaderCache     // the partition leaders of the transactions
	coords  *txnCoordinators // the transaction coordinators of the ids
	reader  *Reader

	// ctx ends at Close; the background requests (a warm-up, an abort of
	// an ended epoch's transaction) run under it.
	ctx        context.Context
	cancel     context.CancelFunc
	background sync.WaitGroup // the warm-ups in flight

	mu        sync.Mutex
	closed    bool
	ids       map[string]*idState // what the wire keeps of each transactional id it minted or warmed
	minted    map[Producer]*Epoch // every mint of this wire
	closeOnce sync.Once

	// closers are the franz-go clients being closed in the background: a
	// franz-go Close waits up to a second for requests in flight, which a
	// call bounded by its context cannot wait for. Close waits for them
	// at most CloseBound.
	closers sync.WaitGroup

	// plainOptions build plain, and every producer that replaces it for
	// the appends (append.go); appender is the producer of the appends
	// now (plain until the first rebuild), guarded by mu, and rebuilds
	// serializes the rebuilds.
	plainOptions []kgo.Opt
	appender     *appender
	rebuilds     sync.Mutex
}

// idState is what a Wire keeps of one transactional id, in one map entry
// and one allocation (a wire may hold thousands of ids): its newest epoch,
// its mint slot and the pair of an abandoned mint (mint_late.go), and
// whether a registration warmed its route (warm.go). w.mu guards current
// and warmed; the idMint has its own locks.
type idState struct {
	current *Epoch // the newest mint of the id; nil before the first
	warmed  bool   // a registration looked up the id's coordinator
	mint    idMint
}

// idLocked returns the state of txnID, made at its first use. The caller
// holds w.mu.
func (w *Wire) idLocked(txnID string) *idState {
	id := w.ids[txnID]
	if id == nil {
		id = new(idState)
		w.ids[txnID] = id
	}
	return id
}

// CloseBound bounds how long [Wire.Close] waits for franz-go to close the
// clients.
const CloseBound = 500 * time.Millisecond

// New builds the clients of a Wire. It opens no connection; the first
// request does.
//
// The defaults come before the caller's options, so that an option
// overrides them: a metadata min age of 500 ms ([MetadataMinAge]), a
// request timeout overhead of the renew interval clamped to 1-10 s, and
// a retry backoff of 50 ms doubling to 500 ms ([RetryBackoff]). After the
// options come what the transactions rest on: the seed brokers, and for
// the plain producer acks=all, no linger and the manual partitioner; for
// the transactional and the reader's clients the capped versions.
//
// It returns the error of an option that kgo rejects, an error for
// options that disable idempotent writes or name a transactional id, and
// one for a TxnTimeout outside the int32 milliseconds of the request.
func New(config Config) (*Wire, error) {
	txnTimeoutMillis, err := Millis32("transaction timeout (the lease duration; transaction.timeout.ms, InitProducerId's TransactionTimeoutMillis)", config.TxnTimeout)
	if err != nil {
		return nil, err
	}
	base := append([]kgo.Opt{
		kgo.MetadataMinAge(MetadataMinAge),
		kgo.RequestTimeoutOverhead(RequestTimeoutOverhead(config.RenewInterval)),
		kgo.RetryBackoffFn(RetryBackoff),
	}, config.Options...)
	base = append(base, kgo.SeedBrokers(config.Brokers...))

	plainOptions := append(slices.Clone(base),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	plain, err := kgo.NewClient(plainOptions...)
	if err != nil {
		return nil, err
	}
	if disabled, _ := plain.OptValue(kgo.DisableIdempotentWrite).(bool); disabled {
		plain.Close()
		return nil, errors.New("the client options disable idempotent writes, which transactions need")
	}
	if values := plain.OptValues(kgo.TransactionalID); len(values) == 2 {
		if set, _ := values[1].(bool); set {
			plain.Close()
			return nil, errors.New("the client options name a transactional id; the transport sets one per role")
		}
	}
	allowed := clientVersions(plain)
	versions := leaseVersions(allowed)

	// The transactional client sends the raw InitProducerId,
	// AddPartitionsToTxn, Produce and EndTxn of every id, so it takes the
	// capped versions: an EndTxn of version 5 would bump the epoch. The
	// reader's client takes them too, as it did when it sent the aborts.
	txn, err := kgo.NewClient(append(slices.Clone(base), kgo.MaxVersions(versions))...)
	if err != nil {
		plain.Close()
		return nil, err
	}
	readerClient, err := kgo.NewClient(append(slices.Clone(base), kgo.MaxVersions(versions))...)
	if err != nil {
		plain.Close()
		txn.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	reader := newReader(readerClient, plain, config.KeyGroup, config.TxnTimeout, config.RenewInterval)
	w := &Wire{
		config:           config,
		txnTimeoutMillis: txnTimeoutMillis,
		versions:         allowed,
		plain:            plain,
		admin:            kadm.NewClient(plain),
		txn:              txn,
		leaders:          newLeaderCache(txn),
		coords:           newTxnCoordinators(txn),
		reader:           reader,
		ctx:              ctx,
		cancel:           cancel,
		ids:              make(map[string]*idState),
		minted:           make(map[Producer]*Epoch),
		plainOptions:     plainOptions,
		appender:         newAppender(plain),
	}
	// A topic deleted and created again fails every produce of franz-go's
	// producer with UNKNOWN_TOPIC_ID until the client forgets it (franz-go
	// does not adopt the new id); the reader's lookup is the first to see
	// the new id.
	reader.recreated = func(topics []string) { w.producer().PurgeTopicsFromProducing(topics...) }
	return w, nil
}

// leaseVersions returns the request versions of the transactional client:
// the versions the caller allowed (base), with the caps of the request
// table (versions.go): EndTxn at 4 and Produce at 11, so that a commit
// keeps the epoch (see Wire), and AddPartitionsToTxn at 3, the last
// version for clients (4 and up batch the transactions of several
// producers, for brokers; the wire sends it pinned to the coordinator,
// txnCoordinators, as it is).
func leaseVersions(base *kversion.Versions) *kversion.Versions {
	versions := new(kversion.Versions)
	base.EachMaxKeyVersion(func(key, version int16) { versions.SetMaxKeyVersion(key, version) })
	for _, row := range requestTable {
		if row.cap < 0 || row.Client != "transactional" {
			continue
		}
		if v, ok := versions.LookupMaxKeyVersion(row.Key.Int16()); ok && v > row.cap {
			versions.SetMaxKeyVersion(row.Key.Int16(), row.cap)
		}
	}
	return versions
}

// Reader returns the reader of the wire, which follows every partition
// that a read or a watch asked for until Close.
func (w *Wire) Reader() *Reader { return w.reader }

// Closed reports whether Close ran. It is safe for concurrent use.
func (w *Wire) Closed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// Close ends every epoch of the wire (a write in flight fails at once, and
// every later write under one returns an *Error of class Closed, with
// Ended set), closes the three clients and ends the reader. Every later
// call returns an *Error of class Closed.
//
// It returns within CloseBound. franz-go's own Close of a client waits up
// to a second for requests in flight to a silent broker; such a client
// finishes closing in the background, on a goroutine of the wire, and
// sends nothing more. Close is idempotent and safe for concurrent use.
func (w *Wire) Close() {
	w.closeOnce.Do(func() {
		w.mu.Lock()
		w.closed = true
		epochs := make([]*Epoch, 0, len(w.minted))
		for _, e := range w.minted {
			epochs = append(epochs, e)
		}
		rebuilt := w.appender.client // a producer that replaced plain, or plain itself
		w.mu.Unlock()
		for _, e := range epochs {
			e.end(&Error{Op: "token " + e.producer.String() + " of role " + e.txnID, Class: Closed})
		}
		w.cancel()
		w.closers.Go(w.background.Wait)
		w.closers.Go(w.reader.close)
		w.closers.Go(w.txn.Close)
		w.closers.Go(w.plain.Close)
		if rebuilt != w.plain {
			w.closers.Go(rebuilt.Close)
		}
	})
	closed := make(chan struct{})
	go func() { // ends when the last client has closed
		w.closers.Wait()
		close(closed)
	}()
	bound := time.NewTimer(CloseBound)
	defer bound.Stop()
	select {
	case <-closed:
	case <-bound.C:
	}
}
