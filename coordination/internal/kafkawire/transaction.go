package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// This file holds the life of one transaction of an epoch: it takes the
// epoch's slot, runs AddPartitionsToTxn, the Produce loop (produce.go) and
// EndTxn, and decides, with Classify, what a failure does to the epoch: a
// fence or a refused transactional id ends it, the coordinator's abort at
// the transaction timeout ends it as lost, and a transient failure aborts
// the transaction and keeps the epoch. A call that gives up leaves the
// transaction to finish in the background, holding the slot.

// abortTimeout bounds the EndTxn(abort) of an ended epoch (abortOpen).
const abortTimeout = 10 * time.Second

// Transact writes records in one transaction of the epoch, each to the
// partition it names (records of one partition keep their order), and
// returns after the commit: a read_committed reader sees all of them or
// none, and they are on the in-sync replicas of their partitions. It
// reads the Partition, Key, Value and Headers of each record; a nil value
// is a tombstone. The caller checks the records (a partition in range,
// not a state topic).
//
// Transactions of one epoch run one at a time. ctx bounds the call, the
// wait for the epoch's previous transaction included, and the call returns
// at most AbandonGrace after ctx ends: a transaction still in flight then
// returns an *Error of class OutcomeUnknown whose Err is ctx's error, and
// goes on in the background within the transaction timeout: a batch that
// got no answer goes again until its leader answers, so that its
// partition's next sequence number is known, and the transaction is then
// aborted, unless its commit was on its way.
//
// Its errors are *Error, with op as their Op (how far the transaction got
// follows it, as ", nothing written", ", nothing committed" or
// " (aborted)"). An error with Ended set ended the epoch: Fenced for a
// refused pair (and for an epoch that the wire minted over), OutcomeUnknown
// for a commit that failed or an abort that found no open transaction,
// ProducerLost for a producer state that only a new epoch repairs (a failed
// abort, a batch without an answer, a refused sequence, the coordinator's
// abort at the transaction timeout), NotAuthorized for a refused
// transactional id, Closed after Close. A transaction with a request whose
// answer timed out returns its own outcome and then ends the epoch with
// OutcomeUnknown (see "A request without an answer"). Every later call
// then returns that error under its own op, without a request. Any other
// error aborted the transaction, and the epoch goes on.
func (e *Epoch) Transact(ctx context.Context, op string, records []Record) error {
	if err := e.endedErr(); err != nil {
		return endedWithin(op, err)
	}
	if err := e.slot.Acquire(ctx); err != nil {
		return &Error{Op: op, Class: Canceled, Err: err,
			Detail: errors.New("waited for the transaction in flight of the same epoch, nothing written")}
	}
	done := make(chan error, 1)
	go func() { // owned by this call, or by the epoch once the call gives up; it ends with the transaction
		defer e.slot.Unlock()
		done <- e.transactHeld(ctx, op, records)
	}()
	if answered, err := awaitWithGrace(ctx, done); answered {
		return err
	}
	return &Error{Op: op, Class: OutcomeUnknown, Err: ctx.Err()}
}

// endedWithin returns the end of the epoch as the error of a call op that
// sent nothing. After an unknown outcome (OutcomeUnknown) op says
// ", nothing written": the unknown outcome is an earlier request's.
func endedWithin(op string, ended *Error) *Error {
	if ended.Class == OutcomeUnknown {
		op += ", nothing written"
	}
	return within(PathProduce, op, ended)
}

// transactHeld runs one transaction (transactOnce), and then ends the
// epoch when a request of it may still be applied later (see "A request
// without an answer" below). The caller holds e.slot.
func (e *Epoch) transactHeld(ctx context.Context, op string, records []Record) error {
	err := e.transactOnce(ctx, op, records)
	path, mayLand := e.copyMayLand()
	if !mayLand {
		return err
	}
	e.end(unansweredError(e, path))
	return err // the transaction's own outcome, which the answers that came say; the next call gets the end
}

// A request without an answer.
//
// A request of the epoch that was written to a connection and got no answer
// (mayApplyLater: its answer timed out, as at a broker that is slow or a
// request held on the way, or its connection broke while the client read
// the answer) may still be applied by the broker later, after a resend of
// it was answered and the epoch went on. A broken connection is not a dead
// broker: Kafka's SocketServer applies a request that it read whole even
// after its connection closed (only the answer is dropped), and a proxy
// may break the client's side while it still delivers the request; the
// client cannot tell a killed broker apart (brokeWhileReading). A request
// that franz-go fails because its connection died while it was queued
// behind another one's answer (connectionDied) counts too: a proxy that
// read it ahead delivers it. Only a request that the transport can prove
// was never written whole (a failed dial or write) leaves the epoch
// alone. An
// EndTxn (version 4 keeps the epoch) then ends whatever transaction of the
// pair is open at that moment: a late EndTxn(commit) commits the part of a
// later transaction that is in the log (KAFKA-17754, which KIP-890's epoch
// bump per commit closes and the version cap keeps open); a late
// AddPartitionsToTxn opens a transaction that nobody ends; a lost copy of a
// batch whose sequence number was never used (its leader refused the resend
// before the append, and the transaction was aborted) may be appended in the
// next transaction under the same sequence number, in place of that
// transaction's own batch. A batch that its leader appended is safe: a late
// copy is a duplicate, or out of order, and is never appended.
//
// So after such a transaction no transaction begins under the pair: the
// epoch ends with an *Error of class OutcomeUnknown (Ended set), and every
// later call returns it without a request. The transaction itself returns
// the outcome that the answers say (a resent EndTxn(commit) answered
// without error committed it). The member mints a new epoch to write again,
// which fences every late request of this one. Ending is the root fix
// chosen over a KIP-360 bump (InitProducerId with the current pair) because
// a bump changes the leadership's fencing token, which the Gate and the
// lease records carry; and it costs no request on the path of a write
// whose requests were answered.

// unansweredError is the end of an epoch after a request of path that got
// no answer.
func unansweredError(e *Epoch, path Path) *Error {
	return &Error{Op: "token " + e.producer.String() + " of role " + e.txnID, Class: OutcomeUnknown,
		Detail: fmt.Errorf("the %s request of a transaction of the pair got no answer (its answer timed out, or its connection broke after it was written), and the broker may still apply it "+
			"to a later transaction of the pair (a late EndTxn(commit) commits whatever is open then), "+
			"so the transport begins no transaction under the pair again", path)}
}

// transactOnce runs one transaction: AddPartitionsToTxn of its partitions,
// a Produce to each of their leaders, and EndTxn. The caller holds e.slot.
func (e *Epoch) transactOnce(ctx context.Context, op string, records []Record) error {
	// ectx ends with the epoch: every request of the transaction runs
	// under it. An epoch that already ended starts none.
	ectx, finish, endedBefore := e.beginTxn()
	if endedBefore != nil {
		return endedWithin(op, endedBefore)
	}
	defer finish()
	if err := ctx.Err(); err != nil {
		return &Error{Op: op, Class: Canceled, Err: err}
	}
	w := e.wire
	// Every request before the commit ends with the caller's context, and
	// with the epoch.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ectx, cancel)
	defer stop()

	// A batch that got no answer by the end of the caller's context goes
	// again under bg, so that the partition's next sequence number is
	// known when the transaction is aborted (produce).
	bg, cancelBg := context.WithTimeout(ectx, w.config.TxnTimeout)
	defer cancelBg()

	parts, err := w.planBatches(rctx, records)
	if err != nil {
		return &Error{Op: op + ", nothing written", Class: settled(err), Err: err}
	}
	defer func() {
		if anyLost(parts) {
			e.noteUnanswered(PathProduce)
		}
	}()
	if err := e.addPartitions(rctx, parts); err != nil {
		// An AddPartitionsToTxn that got no answer may have opened the
		// transaction; one that the coordinator refused did not.
		return e.failed(ectx, PathAddPartitions, op, []error{err}, Classify(PathAddPartitions, err) == OutcomeUnknown, parts)
	}
	if failures := e.produce(rctx, bg, parts); len(failures) > 0 {
		return e.failed(ectx, PathProduce, op, failures, true, parts)
	}

	// The caller's deadline no longer applies: a commit abandoned midway has
	// an outcome that only a new epoch resolves.
	commitCtx, cancelCommit := context.WithTimeout(ectx, w.config.TxnTimeout)
	defer cancelCommit()
	err = e.endTxn(commitCtx, true)
	if err == nil {
		return nil
	}
	switch Classify(PathCommit, err) {
	case Fenced:
		return e.end(e.fenceError(op, err))
	case NotAuthorized:
		// The coordinator refused the EndTxn: nothing committed.
		ended := e.end(&Error{Op: op + ", nothing committed", Class: NotAuthorized, Err: err})
		e.abortOpen()
		return ended
	case Retriable: // TRANSACTION_ABORTABLE
		return e.failed(ectx, PathCommit, op, []error{err}, true, parts)
	}
	ended := e.end(&Error{Op: op, Class: OutcomeUnknown, Err: err,
		Detail: errors.New("the commit failed and its outcome is unknown, so the records may be in the log; " +
			"the transport ends the producer, because only a new epoch repairs it")})
	e.abortOpen()
	return ended
}

// failed handles the errors of a transaction before its commit, which a
// request of path returned. A fence ends the epoch, and so does a refusal
// of the transactional id. Any other error aborts the transaction (when
// open says that it may be open at the coordinator) and keeps the epoch,
// unless the abort fails, or the errors leave the producer unable to go
// on under the pair: a sequence number or producer state that the broker
// refused (Classify: ProducerLost on PathProduce), or a batch whose answer
// never came, so that the partition's next sequence number is unknown.
// The caller holds e.slot; ectx is the transaction's context (beginTxn).
func (e *Epoch) failed(ectx context.Context, path Path, op string, causes []error, open bool, parts []*partitionBatches) error {
	cause := errors.Join(causes...)
	if len(causes) == 1 {
		cause = causes[0]
	}
	switch {
	case Classify(path, cause) == Fenced:
		return e.end(e.fenceError(op, cause))
	case roleDenied(cause):
		// The member may no longer use the role's transactional id: no
		// write under the pair can land until an operator grants it.
		ended := e.end(&Error{Op: op + ", nothing committed", Class: NotAuthorized, Err: cause})
		e.abortOpen()
		return ended
	}
	if open {
		// The abort may wait for a coordinator that moves (9 s after a
		// kill -9 with Kafka's defaults): it is bounded by the transaction
		// timeout, after which the coordinator aborts by itself.
		ctx, cancel := context.WithTimeout(ectx, e.wire.config.TxnTimeout)
		err := e.endTxn(ctx, false)
		cancel()
		if err != nil {
			switch class := Classify(PathAbort, err); {
			case class == Refused && !anyAdded(parts):
				// INVALID_TXN_STATE, and nothing was open: the
				// AddPartitionsToTxn that got no answer never reached the
				// coordinator.
			case class == Fenced:
				return e.end(e.fenceError(op, errors.Join(cause, err)))
			case class == Refused:
				// INVALID_TXN_STATE with partitions added: the transaction
				// is no longer open, and this epoch ended it with no
				// request that was answered. Whether it committed is
				// unknown: only a late EndTxn(commit) ends a transaction so.
				ended := e.end(&Error{Op: op, Class: OutcomeUnknown, Err: err,
					Detail: fmt.Errorf("%w; the abort found no open transaction, though records were sent in it, "+
						"so something else ended it and whether it committed is unknown; the transport ends the producer", cause)})
				e.abortOpen()
				return ended
			default:
				ended := e.end(&Error{Op: op + ", nothing committed", Class: ProducerLost, Err: err,
					Detail: fmt.Errorf("%w; the abort failed too, so the transport ends the producer", cause)})
				e.abortOpen()
				return ended
			}
		}
	}
	switch {
	case producerStateRefused(cause):
		return e.end(&Error{Op: op + ", nothing committed (aborted)", Class: ProducerLost,
			Detail: fmt.Errorf("%w; the broker refused the producer state of the token, "+
				"which only a new epoch resets, so the transport ends the producer", cause)})
	case anyUnknown(parts):
		return e.end(&Error{Op: op + ", nothing committed (aborted)", Class: ProducerLost,
			Detail: fmt.Errorf("%w; a batch got no answer, so the next sequence number "+
				"of its partition is unknown, which only a new epoch resets, so the transport ends the producer", cause)})
	}
	if !open {
		return &Error{Op: op + ", nothing written", Class: settled(cause), Err: cause}
	}
	return &Error{Op: op + " (aborted)", Class: settled(cause), Err: cause}
}

// fenceError describes a refusal of the pair. The transaction coordinator
// refuses a pair for two reasons: another member minted a newer epoch (a
// fence: class Fenced), or the coordinator itself aborted a transaction of
// the pair that outlived transaction.timeout.ms and bumped the epoch so
// that the stalled producer cannot go on. Nobody else holds the role in
// the second case, so the error says so, of class ProducerLost instead;
// the epoch ends either way, because no write under the pair can land
// again. It tells the two apart with one DescribeTransactions request
// (bounded by fenceDescribeTimeout): the coordinator's pair is the
// epoch's producer id at the next epoch, the transaction is aborting or
// aborted, and it started at least a transaction timeout ago. A
// challenger's InitProducerId leaves an Empty transaction instead, at the
// next epoch or the one after. The caller holds e.slot.
func (e *Epoch) fenceError(op string, err error) *Error {
	ctx, cancel := context.WithTimeout(context.Background(), fenceDescribeTimeout)
	defer cancel()
	txn, derr := e.wire.describeTransaction(ctx, e.txnID)
	if derr == nil && txn.Err == nil && abortedAtTimeout(e.producer, txn, time.Now().UnixMilli()) {
		return &Error{Op: op, Class: ProducerLost, Err: err,
			Detail: fmt.Errorf("the transaction coordinator aborted the transaction of %s at its timeout "+
				"(transaction.timeout.ms %d, which the transport sets to the lease duration) and bumped the epoch to %d:%d; "+
				"no other member minted, but no write under %s can land again",
				e.producer, txn.TimeoutMillis, txn.ProducerID, txn.ProducerEpoch, e.producer)}
	}
	return &Error{Op: op, Class: Fenced, Err: err}
}

// fenceDescribeTimeout bounds the DescribeTransactions of fenceError.
const fenceDescribeTimeout = time.Second

// abortedAtTimeout reports whether a described transaction shows the
// coordinator's own abort of producer's transaction at its timeout. See
// fenceError.
func abortedAtTimeout(producer Producer, txn kadm.DescribedTransaction, nowMillis int64) bool {
	if txn.ProducerID != producer.ID || int(txn.ProducerEpoch) != int(producer.Epoch)+1 {
		return false
	}
	if txn.State != "PrepareAbort" && txn.State != "CompleteAbort" {
		return false
	}
	return txn.StartTimestamp > 0 && txn.TimeoutMillis > 0 && nowMillis-txn.StartTimestamp >= int64(txn.TimeoutMillis)
}

// abortOpen ends, as far as it can, a transaction that an ended epoch may
// have left open, so that it does not hide the newer records of its
// partitions until the coordinator aborts it at the transaction timeout.
// It sends EndTxn(abort) at the epoch's own pair, version 4: an abort can
// mint no epoch, and the coordinator refuses it when the pair is stale or
// no transaction is open. The outcome does not matter to the caller. The
// caller holds e.slot.
func (e *Epoch) abortOpen() {
	ctx, cancel := context.WithTimeout(e.wire.ctx, min(abortTimeout, e.wire.config.TxnTimeout))
	defer cancel()
	_ = e.endTxn(ctx, false)
}
