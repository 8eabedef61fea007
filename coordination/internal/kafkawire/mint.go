package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/backoff"
)

// This file holds the requests of an epoch to its transaction coordinator
// outside a transaction: InitProducerId, which mints a pair, and
// DescribeTransactions, which reads the coordinator's pair and state.

// initProducerID sends InitProducerId for txnID until the coordinator
// mints, refuses for good, or ctx ends; each request runs under send, so
// that a request in flight when ctx ends still gets its answer.
//
// With unless set, every InitProducerId after the first of the call is
// sent only if no other producer minted since unless was the coordinator's
// pair (rivalMinted); otherwise the call returns an *Error of class Fenced
// without a request: a rival's mint landed while this one waited for the
// coordinator (CONCURRENT_TRANSACTIONS while it aborts the deposed holder's
// transaction, or a coordinator that moves), and a resend would fence the
// rival's first lease.
func (w *Wire) initProducerID(ctx, send context.Context, mint *idMint, txnID, op string, unless *Producer) (Producer, error) {
	pauses := backoff.Doubling{First: 50 * time.Millisecond, Max: time.Second}
	sent := false
	for {
		if err := w.awaitCopy(ctx, send, mint, txnID, op); err != nil {
			return Producer{}, err // no InitProducerId while a copy of an earlier one may land (mint_copy.go)
		}
		var minted Producer
		var unanswered unansweredAt
		err := withConcurrentTransactions(ctx, func() error {
			if sent && unless != nil {
				if rival, moved := w.rivalMinted(ctx, txnID, *unless); moved {
					return &Error{Op: op, Class: Fenced,
						Detail: fmt.Errorf("another producer minted %v while this mint waited for the coordinator (the pair was %v), so this mint sends no InitProducerId again", rival, *unless)}
				}
			}
			sent = true
			kresp, err := w.coords.requestWith(ctx, send, txnID, func() kmsg.Request {
				req := kmsg.NewPtrInitProducerIDRequest()
				req.TransactionalID = &txnID
				req.TransactionTimeoutMillis = w.txnTimeoutMillis // checked in New
				req.ProducerID, req.ProducerEpoch = -1, -1
				return patientInitProducerID{req, req.TransactionTimeoutMillis}
			}, func(resp kmsg.Response) error {
				return codeError(resp.(*kmsg.InitProducerIDResponse).ErrorCode)
			}, &unanswered)
			if unanswered.pending() { // written, no answer: requestWith sent it once only
				mint.noteCopy(unanswered.nodes, w.mintCopyLife())
			}
			if err != nil {
				return err
			}
			resp := kresp.(*kmsg.InitProducerIDResponse)
			minted = Producer{ID: resp.ProducerID, Epoch: resp.ProducerEpoch}
			return nil
		})
		if err == nil {
			if invalid := invalidPair(minted); invalid != nil {
				return Producer{}, &Error{Op: op, Class: Refused,
					Detail: errors.New("the broker minted no producer id (is it older than Kafka 0.11?)"), Err: invalid}
			}
			return minted, nil
		}
		var rival *Error
		if errors.As(err, &rival) && rival.Class == Fenced && unless != nil {
			return Producer{}, rival
		}
		class := Classify(PathMint, err)
		if class == Misconfigured {
			return Producer{}, &Error{Op: op, Class: Misconfigured, Err: err,
				Detail: fmt.Errorf("the broker refuses the lease duration %v as transaction timeout; "+
					"shorten the lease or raise transaction.max.timeout.ms", w.config.TxnTimeout)}
		}
		if class != Retriable || ctx.Err() != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
			}
			return Producer{}, wrap(PathMint, op, err)
		}
		select {
		case <-ctx.Done():
			return Producer{}, &Error{Op: op, Class: Canceled, Err: fmt.Errorf("%w (last error: %w)", ctx.Err(), err)}
		case <-time.After(pauses.Next()):
		}
	}
}

// patientInitProducerID is an InitProducerId request that waits for its
// answer on its connection for the transaction timeout (wait, in ms) more
// than the client's read timeout: franz-go reads a request with a timeout
// field (kmsg.TimeoutRequest) that long, on the broker's connection for
// such requests, where a late answer holds up no other request.
//
// It closes a self-fence. An InitProducerId that got no answer within the
// read timeout (the renew interval) was sent again on a new connection
// (requestWith); when the first one was applied after the second, it
// bumped the epoch over the pair that the second one minted, and the
// member's first write under that pair failed as fenced, with no other
// member present. Kafka cannot tell the two apart (an InitProducerId
// without the KIP-360 pair always bumps, and one with it still fences a
// pair whose transaction is open), and DescribeTransactions cannot say
// whose mint a pair is. So the mint waits for the answer of the request it
// sent, the one InitProducerId of the id in flight (mint_late.go keeps the
// id's mint slot until then, when the caller gives up first, and the next
// mint takes the pair). A coordinator that moved to another node
// (untilMoved: the old one can no longer apply it) sends it again at once;
// a connection that broke after the write, or an answer later than the read
// timeout plus the transaction timeout, sends it again only once no copy of
// it can land (mint_copy.go).
type patientInitProducerID struct {
	*kmsg.InitProducerIDRequest
	wait int32
}

// Timeout returns the wait of the request, in ms.
func (r patientInitProducerID) Timeout() int32 { return r.wait }

// rivalMinted reports whether the coordinator holds a pair of txnID other
// than from that another producer minted: one in a state that only a
// completed InitProducerId or a later transaction leaves (Empty, Ongoing,
// PrepareCommit, CompleteCommit), which neither this wire minted nor an
// abandoned attempt of this wire got. An abort in progress (PrepareAbort,
// CompleteAbort) may be this mint's own: an InitProducerId over an open
// transaction bumps the epoch to abort it before it mints. A
// DescribeTransactions that fails says nothing moved.
func (w *Wire) rivalMinted(ctx context.Context, txnID string, from Producer) (Producer, bool) {
	txn, err := w.describeTransaction(ctx, txnID)
	if err != nil || txn.Err != nil {
		return Producer{}, false
	}
	pair := Producer{ID: txn.ProducerID, Epoch: txn.ProducerEpoch}
	if pair == from || invalidPair(pair) != nil || w.Epoch(pair) != nil {
		return Producer{}, false
	}
	if minted, _ := w.LateMint(txnID, pair); minted {
		return Producer{}, false
	}
	switch txn.State {
	case "Empty", "Ongoing", "PrepareCommit", "CompleteCommit":
		return pair, true
	}
	return Producer{}, false
}

// invalidPair returns an error for a pair with a negative id or epoch,
// which no InitProducerId of a transactional id mints.
func invalidPair(p Producer) error {
	switch {
	case p.ID < 0:
		return fmt.Errorf("invalid fencing token: negative producer id %d", p.ID)
	case p.Epoch < 0:
		return fmt.Errorf("invalid fencing token: negative producer epoch %d", p.Epoch)
	}
	return nil
}

// DescribeEpoch reports the producer pair that the transaction coordinator
// holds for txnID, with one DescribeTransactions request, retried as a
// mint is (PathMint) until ctx ends. It joins no group and takes no epoch.
//
// It returns false, with no error, for a transactional id that the
// coordinator does not know (never used, or expired after
// transactional.id.expiration.ms), that is Dead, or that carries a
// negative id or epoch. It returns an *Error of class NotAuthorized for a
// missing DESCRIBE ACL on the TransactionalId, Canceled when ctx ends, and
// Closed on a closed wire. op names the call in errors.
func (w *Wire) DescribeEpoch(ctx context.Context, txnID, op string) (Producer, bool, error) {
	if w.Closed() {
		return Producer{}, false, errClosed
	}
	pauses := backoff.Doubling{First: 50 * time.Millisecond, Max: time.Second}
	for {
		producer, held, err := w.describeEpochOnce(ctx, txnID, op)
		if err == nil || err.Class != Retriable {
			if err == nil {
				return producer, held, nil
			}
			return producer, held, err
		}
		select {
		case <-ctx.Done():
			return Producer{}, false, &Error{Op: op, Class: Canceled, Err: fmt.Errorf("%w (last error: %w)", ctx.Err(), err)}
		case <-time.After(pauses.Next()):
		}
	}
}

// describeEpochOnce is one DescribeTransactions of DescribeEpoch.
func (w *Wire) describeEpochOnce(ctx context.Context, txnID, op string) (Producer, bool, *Error) {
	txn, err := w.describeTransaction(ctx, txnID)
	if err != nil {
		return Producer{}, false, wrap(PathMint, op, err)
	}
	if txn.Err != nil {
		if txnIDNotFound(txn.Err) {
			return Producer{}, false, nil
		}
		return Producer{}, false, wrap(PathMint, op, txn.Err)
	}
	producer := Producer{ID: txn.ProducerID, Epoch: txn.ProducerEpoch}
	if txn.State == "Dead" || invalidPair(producer) != nil {
		return Producer{}, false, nil
	}
	return producer, true, nil
}

// describeTransaction sends DescribeTransactions for one transactional id
// to its coordinator, and returns the answer in kadm's shape. A code of
// the transactional id (TRANSACTIONAL_ID_NOT_FOUND, a refused ACL) is in
// the result's Err; the error is for a request that got no answer by the
// end of ctx.
func (w *Wire) describeTransaction(ctx context.Context, txnID string) (kadm.DescribedTransaction, error) {
	kresp, err := w.coords.request(ctx, txnID, func() kmsg.Request {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{txnID}
		return req
	}, func(kresp kmsg.Response) error {
		for _, state := range kresp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
			if err := codeError(state.ErrorCode); coordinatorMoved(err) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return kadm.DescribedTransaction{}, err
	}
	for _, state := range kresp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
		if state.TransactionalID != txnID {
			continue
		}
		return kadm.DescribedTransaction{
			TxnID:          state.TransactionalID,
			State:          state.State,
			TimeoutMillis:  state.TimeoutMillis,
			StartTimestamp: state.StartTimestamp,
			ProducerID:     state.ProducerID,
			ProducerEpoch:  state.ProducerEpoch,
			Err:            codeError(state.ErrorCode),
		}, nil
	}
	return kadm.DescribedTransaction{TxnID: txnID, Err: errTxnIDNotFound}, nil
}
