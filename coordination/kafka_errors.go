package coordination

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// This file holds the one place where KafkaTransport decides what an error
// of franz-go means for a leadership. Every write path sends its errors
// through kafkaFailureOf, so the broker codes that fence a token are listed
// exactly once.

// kafkaFailure is what an error of a Kafka call means for the transport.
type kafkaFailure int

const (
	// failureTransient is an error that a retry of the same call under the
	// same token may overcome: a coordinator that moved or is loading,
	// NOT_ENOUGH_REPLICAS, a lost connection, a deadline. It never ends a
	// leadership.
	failureTransient kafkaFailure = iota

	// failureFenced is a broker's refusal of the token: a newer epoch of
	// the role exists, or the producer id that the token names is gone.
	failureFenced

	// failureDenied is a missing ACL. A retry cannot help until an
	// operator grants it.
	failureDenied

	// failureClosed is a call on a client that this transport closed.
	failureClosed

	// failureMisconfigured is a configuration the broker refuses, such as
	// a transaction timeout above transaction.max.timeout.ms.
	failureMisconfigured
)

// errTransportClosed reports a call on a closed KafkaTransport.
var errTransportClosed = errors.New("coordination: the KafkaTransport is closed")

// kafkaFailureOf classifies an error that a franz-go call, or a broker code
// of a raw request's answer, returned.
//
// The fences are the broker codes 47 INVALID_PRODUCER_EPOCH, 90
// PRODUCER_FENCED, and 49 INVALID_PRODUCER_ID_MAPPING (the producer id of the
// token expired or was replaced), from any request of a transaction:
// AddPartitionsToTxn, Produce or EndTxn. The transport wraps the kerr value
// with context, so errors.Is finds the code through each wrapper.
//
// TRANSACTION_ABORTABLE, CONCURRENT_TRANSACTIONS, NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, NOT_ENOUGH_REPLICAS and network errors are
// transient. So is every error this function does not know: the caller
// aborts the transaction, and a token that really lost the role is fenced on
// its next write.
func kafkaFailureOf(err error) kafkaFailure {
	switch {
	case errors.Is(err, kerr.InvalidProducerEpoch),
		errors.Is(err, kerr.ProducerFenced),
		errors.Is(err, kerr.InvalidProducerIDMapping):
		return failureFenced
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed),
		errors.Is(err, kerr.TopicAuthorizationFailed),
		errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.GroupAuthorizationFailed):
		return failureDenied
	case errors.Is(err, kgo.ErrClientClosed), errors.Is(err, errTransportClosed):
		return failureClosed
	case errors.Is(err, kerr.InvalidTransactionTimeout):
		return failureMisconfigured
	default:
		return failureTransient
	}
}

// describeKafkaError returns err with the context an operator needs to act
// on it. A missing ACL names the ACL and wraps [ErrNotAuthorized]; a fence
// wraps [ErrFenced]; a closed
// client says so. op names the call, such as "lease write of role
// controller under 4242:7".
func describeKafkaError(op string, err error) error {
	switch kafkaFailureOf(err) {
	case failureFenced:
		return wrapf(err, []error{ErrFenced}, "%s", op)
	case failureMisconfigured:
		return wrapf(err, []error{ErrMisconfigured}, "%s", op)
	case failureDenied:
		return fmt.Errorf("coordination: %s: %w, and no retry helps until an operator grants the ACL "+
			"(a member needs WRITE and DESCRIBE on the TransactionalId of each role, WRITE and READ and DESCRIBE "+
			"on the state topic, and IDEMPOTENT_WRITE on the cluster before Kafka 3.0): %w", op, ErrNotAuthorized, err)
	default:
		return wrapf(err, nil, "%s", op)
	}
}

// retriableMint reports whether AcquireEpoch tries InitProducerId again
// after err: CONCURRENT_TRANSACTIONS (the coordinator still ends the previous
// holder's transaction), COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, and
// every other retriable broker code or connection error. franz-go retries
// these itself for a while; AcquireEpoch keeps on until its context ends.
func retriableMint(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, kerr.ConcurrentTransactions) || kerr.IsRetriable(err) {
		return true
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return false // a broker answer that no retry changes
	}
	return kafkaFailureOf(err) == failureTransient // a connection error
}
