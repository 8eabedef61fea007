package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/krabka-io/krabka-streams-go/coordination/internal/slot"
)

// This file holds the epochs of a Wire: the state of one minted producer
// pair (its transactional id, the sequence numbers of its partitions, the
// slot that runs its transactions one at a time, and why it ended), and
// the registry of every pair that the wire minted. The mint itself is in
// mint.go, the transactions in transaction.go.

// Epoch is one producer pair that [Wire.Mint] minted for a transactional
// id, and the producer state that its transactions keep.
//
// A transaction holds slot from its first request to its end, so the
// transactions of one epoch run one at a time, and only the holder of the
// slot touches sequences. mu guards ended, and is held for moments: a
// caller that gives up on a transaction in flight ends the epoch without
// waiting for the slot. An Epoch is safe for concurrent use.
type Epoch struct {
	wire     *Wire
	txnID    string
	producer Producer
	slot     slot.Slot // held for a whole transaction

	// sequences is the next sequence number of each partition that the
	// epoch wrote: the broker keeps one per (producer id, partition), and
	// a new epoch starts every partition at 0. Guarded by slot.
	sequences partitionSequences

	// unanswered is the path of a request of the transaction in flight
	// that the broker may still apply later, with no answer to say so
	// (noteUnanswered); hasUnanswered says that there is one. Guarded by
	// slot: transactHeld ends the epoch after such a transaction.
	unanswered    Path
	hasUnanswered bool

	// coordCopies holds the coordinators that an AddPartitionsToTxn or
	// EndTxn of the transaction in flight got no answer from, until
	// another node answers as the coordinator (unansweredAt), and
	// coordPath the path of the first such request. Guarded by slot.
	coordCopies  unansweredAt
	coordPath    Path
	hasCoordPath bool

	mu    sync.Mutex
	ended *Error // nil while open
	// cancelTxn cancels the context of the transaction in flight (transactHeld),
	// under which every request of the transaction runs, so that the end of
	// the epoch fails it at once; nil between transactions. The context is
	// the transaction's, not the epoch's: a wire keeps thousands of epochs,
	// and an idle one then keeps no context.
	cancelTxn context.CancelFunc
}

func newEpoch(wire *Wire, txnID string, producer Producer) *Epoch {
	return &Epoch{wire: wire, txnID: txnID, producer: producer}
}

// beginTxn returns the context of a transaction of the epoch, which ends
// when the epoch does or when the returned func runs, and the error of an
// epoch that already ended. The caller holds e.slot, and calls the func
// when the transaction ends.
func (e *Epoch) beginTxn() (context.Context, func(), *Error) {
	ctx, cancel := context.WithCancel(context.Background())
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended != nil {
		cancel()
		return nil, nil, e.ended
	}
	e.cancelTxn = cancel
	return ctx, func() {
		e.mu.Lock()
		e.cancelTxn = nil
		e.mu.Unlock()
		cancel()
	}, nil
}

// noteUnanswered records that a request of path of the transaction in
// flight was written and got no answer, so that the broker may still apply
// it later, on a later transaction of the pair. The caller holds e.slot.
func (e *Epoch) noteUnanswered(path Path) {
	if !e.hasUnanswered {
		e.unanswered, e.hasUnanswered = path, true
	}
}

// noteCoordinatorCopy records, after a request of path to the
// coordinator, whether a copy of it or of an earlier request of the
// transaction may still land (coordCopies). The caller holds e.slot.
func (e *Epoch) noteCoordinatorCopy(path Path) {
	if e.coordCopies.pending() && !e.hasCoordPath {
		e.coordPath, e.hasCoordPath = path, true
	}
}

// copyMayLand reports whether a request of the transaction that just ended
// may still be applied later, and the path of the first such request. The
// caller holds e.slot, and clears it for the next transaction.
func (e *Epoch) copyMayLand() (Path, bool) {
	defer func() { e.hasUnanswered, e.coordCopies.nodes, e.hasCoordPath = false, nil, false }()
	if e.hasUnanswered {
		return e.unanswered, true
	}
	if e.coordCopies.pending() {
		return e.coordPath, true
	}
	return 0, false
}

// TxnID returns the transactional id of the epoch.
func (e *Epoch) TxnID() string { return e.txnID }

// Producer returns the minted pair.
func (e *Epoch) Producer() Producer { return e.producer }

// Ended returns why the epoch ended, an *Error with Ended set, and nil
// while it is open.
func (e *Epoch) Ended() error {
	if err := e.endedErr(); err != nil {
		return err
	}
	return nil
}

// Fenced reports whether the epoch ended because the cluster refused its
// pair, or because this wire minted a newer epoch of its transactional id.
func (e *Epoch) Fenced() bool {
	err := e.endedErr()
	return err != nil && err.Class == Fenced
}

func (e *Epoch) endedErr() *Error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ended
}

// end ends the epoch for good and records why, the first time only, and
// returns the reason that stands, with Ended set. Ending fails the
// requests in flight of the epoch at once, so a transaction that runs
// under it ends promptly.
func (e *Epoch) end(reason *Error) *Error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended != nil {
		return e.ended
	}
	ended := *reason
	ended.Ended = true
	e.ended = &ended
	if e.cancelTxn != nil {
		e.cancelTxn()
	}
	return e.ended
}

// Epoch returns the epoch of the pair that this wire minted, and nil for
// a pair that it did not mint. It is safe for concurrent use.
func (w *Wire) Epoch(producer Producer) *Epoch {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.minted[producer]
}

// Mint mints a new epoch of txnID, with one InitProducerId (the
// transaction timeout of the Config) to the id's transaction coordinator,
// and fences every earlier one, this wire's own included: it first ends
// the id's previous epoch of this wire (class Fenced), and never sends
// InitProducerId for an ended epoch again, because a new InitProducerId
// can mint a new epoch for a deposed member. The coordinator bumps the
// epoch of the id, or allocates a new producer id when the epoch is
// exhausted, and aborts an open transaction of the previous holder.
//
// An attempt that ctx ended before the coordinator answered is not lost:
// its request in flight runs to its answer, and a pair that it minted is
// kept (mint_late.go). The next Mint of the id waits for that request
// first, and takes the kept pair instead of minting again when the
// coordinator still holds exactly that pair with no transaction open
// (DescribeTransactions), since a pair that the coordinator holds is the
// authority whoever asked for it; so a mint abandoned while the
// coordinator moved costs no second epoch. An InitProducerId written
// without an answer is not sent again while a copy of it may land
// (mint_copy.go).
//
// op names the call in errors. It retries what [Classify] calls Retriable
// on PathMint until ctx ends, and then returns an *Error of class Canceled;
// it returns an *Error of class NotAuthorized for a missing WRITE on the
// TransactionalId, Misconfigured for a transaction timeout above the
// broker's transaction.max.timeout.ms, and Closed on a closed wire.
// Concurrent calls for one id run one after the other.
func (w *Wire) Mint(ctx context.Context, txnID, op string) (*Epoch, error) {
	return w.mint(ctx, txnID, op, nil)
}

// MintUnlessMoved is Mint, except that it resends no InitProducerId once
// another producer minted after from was the coordinator's pair of txnID:
// a mint that waits for the coordinator (CONCURRENT_TRANSACTIONS while it
// aborts the deposed holder's transaction, a coordinator that moves) then
// returns an *Error of class Fenced instead of fencing the rival that got
// there first. The campaign of the rival-mint watch calls it, with the
// pair it saw before it challenged.
func (w *Wire) MintUnlessMoved(ctx context.Context, txnID, op string, from Producer) (*Epoch, error) {
	return w.mint(ctx, txnID, op, &from)
}

// mint is Mint, with unless for MintUnlessMoved.
func (w *Wire) mint(ctx context.Context, txnID, op string, unless *Producer) (*Epoch, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, errClosed
	}
	id := w.idLocked(txnID)
	mint := &id.mint
	w.mu.Unlock()

	if err := mint.acquire(ctx); err != nil {
		return nil, &Error{Op: op, Class: Canceled, Err: fmt.Errorf("%w (waiting for the previous mint of the id, abandoned, to get its answer)", err)}
	}
	w.mu.Lock()
	previous := id.current
	w.mu.Unlock()
	if previous != nil {
		previous.end(&Error{Op: "token " + previous.producer.String() + " of role " + txnID, Class: Fenced,
			Detail: errors.New("this transport minted a newer epoch of the role")})
	}

	producer, adopted := w.adoptLate(ctx, mint, txnID)
	if !adopted {
		minted, err, owned := w.mintAttempt(ctx, mint, txnID, op, unless)
		if !owned {
			return nil, err // the request in flight gives the slot back when it answers
		}
		if err != nil {
			mint.release()
			return nil, err
		}
		producer = minted
	}
	defer mint.release()
	epoch := newEpoch(w, txnID, producer)

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		epoch.end(errClosed)
		return nil, errClosed
	}
	id.current = epoch
	w.minted[producer] = epoch
	return epoch, nil
}

// partitionSequences is the next sequence number of each partition that an
// epoch wrote to, 0 for the others. An epoch writes to one partition or a
// few (a role's lease partition, and the topics of its guarded records), so
// a slice searched in order costs less than a map, which a wire that holds
// thousands of epochs keeps for each.
type partitionSequences []partitionSequence

type partitionSequence struct {
	partition Partition
	next      int32
}

// of returns the next sequence number of partition.
func (s partitionSequences) of(partition Partition) int32 {
	for _, p := range s {
		if p.partition == partition {
			return p.next
		}
	}
	return 0
}

// set records the next sequence number of partition.
func (s *partitionSequences) set(partition Partition, next int32) {
	for i := range *s {
		if (*s)[i].partition == partition {
			(*s)[i].next = next
			return
		}
	}
	*s = append(*s, partitionSequence{partition, next})
}
