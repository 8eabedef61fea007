package kafkawire

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// This file is the one place that decides what an error of a broker or of
// franz-go means: Classify, per request path, and the few predicates that
// the machinery's bookkeeping needs (a batch appended or not, a
// coordinator that moved, a fetch session refused). Every broker code that
// the package acts on is named here and nowhere else; the other files only
// turn the codes of an answer into errors (codeError) and ask.

// Class is what an error means for the caller of a request path.
type Class uint8

const (
	// Retriable is an error that the same request may overcome when it is
	// sent again under the same producer pair: a coordinator or leader that
	// moved or is loading, CONCURRENT_TRANSACTIONS, NOT_ENOUGH_REPLICAS, a
	// request without an answer. The package retries it itself while the
	// caller's context lasts. It never ends an epoch.
	Retriable Class = iota

	// Refused is a broker's refusal of this request that no retry of it
	// changes (a record too large, an invalid request, an abortable
	// transaction): the call fails, and the producer pair stays good for
	// the next call.
	Refused

	// Canceled is the end of the caller's context before an answer came;
	// the call is not retried.
	Canceled

	// Missing is a topic or a partition that does not exist
	// (UNKNOWN_TOPIC_OR_PARTITION after the lookups that a new topic gets).
	Missing

	// Fenced is a refusal of the producer pair: 47 INVALID_PRODUCER_EPOCH,
	// 90 PRODUCER_FENCED, 49 INVALID_PRODUCER_ID_MAPPING. A newer epoch of
	// the transactional id exists, or the id's producer id moved. The epoch
	// ends, and is never minted again from here.
	Fenced

	// ProducerLost is a state of the epoch's producer that only a new
	// InitProducerId repairs, though no other member minted: a refused
	// sequence number or producer state, an abort that failed, a batch
	// whose answer never came, the coordinator's own abort at the
	// transaction timeout. The epoch ends.
	ProducerLost

	// OutcomeUnknown is a request that may have taken effect without an
	// answer that says so: a commit that failed, an AddPartitionsToTxn
	// without an answer (Classify), and a transaction that the caller gave
	// up on while it was in flight, which ends in the background (Err is
	// then the context's error, and the epoch goes on). With Ended set it
	// ended the epoch: a failed commit, an abort that found no open
	// transaction after records were sent, or a request of the epoch whose
	// answer timed out and that the broker may still apply to a later
	// transaction (transaction.go, "A request without an answer").
	OutcomeUnknown

	// NotAuthorized is a missing ACL: 53 TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
	// 29 TOPIC_AUTHORIZATION_FAILED, 31 CLUSTER_AUTHORIZATION_FAILED, 30
	// GROUP_AUTHORIZATION_FAILED. No retry helps until an operator grants
	// it.
	NotAuthorized

	// Misconfigured is a configuration that the broker refuses, such as a
	// transaction timeout above transaction.max.timeout.ms (50
	// INVALID_TRANSACTION_TIMEOUT).
	Misconfigured

	// Closed is a call on clients that [Wire.Close] closed.
	Closed
)

var classNames = [...]string{
	Retriable: "retriable", Refused: "refused", Canceled: "canceled", Missing: "missing",
	Fenced: "fenced", ProducerLost: "producer lost", OutcomeUnknown: "outcome unknown",
	NotAuthorized: "not authorized", Misconfigured: "misconfigured", Closed: "closed",
}

// String names the class, such as "fenced".
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "class " + strconv.Itoa(int(c))
}

// Path is a request path: the request, and what its caller does with the
// answer. The same broker code means different things on different paths
// (UNKNOWN_TOPIC_OR_PARTITION is a leader that does not know a partition
// yet to a Produce, and a missing topic to a Metadata lookup).
type Path uint8

const (
	// PathMint is InitProducerId, and the DescribeTransactions of
	// [Wire.DescribeEpoch], which retries as a mint does.
	PathMint Path = iota
	// PathAddPartitions is AddPartitionsToTxn.
	PathAddPartitions
	// PathProduce is a transactional Produce, one partition's answer.
	PathProduce
	// PathCommit is EndTxn(commit).
	PathCommit
	// PathAbort is EndTxn(abort).
	PathAbort
	// PathAppend is a plain idempotent Produce: the registrations.
	PathAppend
	// PathFetch is a read_committed Fetch, and a ListOffsets of a read.
	PathFetch
	// PathMetadata is a Metadata request: a partition's leader.
	PathMetadata
	// PathCoordinator is FindCoordinator, and the coordinator codes of an
	// answer of a transaction coordinator.
	PathCoordinator
	// PathAdmin is a request of topic admin or of a config check:
	// CreateTopics, DescribeConfigs, Metadata and ListOffsets of a topic.
	PathAdmin
)

var pathNames = [...]string{
	PathMint: "InitProducerId", PathAddPartitions: "AddPartitionsToTxn", PathProduce: "Produce (transactional)",
	PathCommit: "EndTxn(commit)", PathAbort: "EndTxn(abort)", PathAppend: "Produce (plain)", PathFetch: "Fetch",
	PathMetadata: "Metadata", PathCoordinator: "FindCoordinator", PathAdmin: "admin",
}

// String names the request of the path, such as "EndTxn(commit)".
func (p Path) String() string {
	if int(p) < len(pathNames) {
		return pathNames[p]
	}
	return "path " + strconv.Itoa(int(p))
}

// Classify returns what err, which a request of path returned (a franz-go
// error, a context's error, or a broker code as a kerr value, wrapped or
// joined in any way), means for its caller. It is a pure function, safe
// for concurrent use; err must not be nil.
//
// On every path but the two EndTxn ones, a fence code is Fenced, a denial
// NotAuthorized, a closed client Closed, and INVALID_TRANSACTION_TIMEOUT
// Misconfigured, in that order. Then:
//
//   - PathMint: the end of a context is Canceled; CONCURRENT_TRANSACTIONS
//     and every retriable code Retriable; any other code Refused; an error
//     without a code (a connection) Retriable.
//   - PathAddPartitions: CONCURRENT_TRANSACTIONS, the coordinator codes and
//     OPERATION_NOT_ATTEMPTED are Retriable, any other code Refused, and an
//     error without a code OutcomeUnknown, a closed client's included: the
//     request may have opened the transaction, which is then aborted.
//   - PathProduce: OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID and
//     INVALID_TXN_STATE are ProducerLost; a code with which a leader
//     refuses a batch before it appends it is Retriable when the code is,
//     and Refused otherwise; another retriable code (REQUEST_TIMED_OUT,
//     NOT_ENOUGH_REPLICAS_AFTER_APPEND) is Retriable; any other code
//     ProducerLost, because the batch may be in the log and the
//     partition's next sequence number is unknown; an error without a code
//     Retriable.
//   - PathCommit: a fence is Fenced, a denial NotAuthorized,
//     TRANSACTION_ABORTABLE Retriable (abort, keep the pair), and anything
//     else OutcomeUnknown, a closed client and a context included.
//   - PathAbort: a fence is Fenced, INVALID_TXN_STATE Refused (nothing
//     was open), and anything else ProducerLost: only a new epoch clears a
//     transaction that could not be aborted.
//   - PathMetadata, PathFetch, PathAdmin: UNKNOWN_TOPIC_OR_PARTITION is
//     Missing; a retriable code Retriable, any other code Refused; an
//     error without a code Retriable.
//   - PathCoordinator: the coordinator codes are Retriable, any other code
//     Refused, an error without a code Retriable.
//   - PathAppend: a retriable code Retriable, any other code Refused, an
//     error without a code Retriable.
func Classify(path Path, err error) Class {
	switch path {
	case PathCommit:
		switch {
		case fenced(err):
			return Fenced
		case denied(err):
			return NotAuthorized
		case errors.Is(err, kerr.TransactionAbortable):
			return Retriable
		}
		return OutcomeUnknown
	case PathAbort:
		switch {
		case fenced(err):
			return Fenced
		case errors.Is(err, kerr.InvalidTxnState):
			return Refused
		}
		return ProducerLost
	}
	switch {
	case fenced(err):
		return Fenced
	case denied(err):
		return NotAuthorized
	case closed(err) && path != PathAddPartitions:
		return Closed
	case errors.Is(err, kerr.InvalidTransactionTimeout):
		return Misconfigured
	}
	var ke *kerr.Error
	code := errors.As(err, &ke)
	switch path {
	case PathMint:
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return Canceled
		case errors.Is(err, kerr.ConcurrentTransactions), kerr.IsRetriable(err):
			return Retriable
		case code:
			return Refused // a broker answer that no retry changes
		}
		return Retriable // a connection error
	case PathAddPartitions:
		switch {
		case errors.Is(err, kerr.ConcurrentTransactions), coordinatorMoved(err), errors.Is(err, kerr.OperationNotAttempted):
			return Retriable
		case code:
			return Refused
		}
		return OutcomeUnknown
	case PathProduce:
		switch {
		case producerStateRefused(err):
			return ProducerLost
		case notAppended(err) && kerr.IsRetriable(err):
			return Retriable
		case notAppended(err):
			return Refused
		case kerr.IsRetriable(err):
			return Retriable // the leader may have appended the batch; it goes again as it is
		case code:
			return ProducerLost
		}
		return Retriable
	case PathMetadata, PathFetch, PathAdmin:
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return Missing
		}
	case PathCoordinator:
		if coordinatorMoved(err) {
			return Retriable
		}
	}
	switch {
	case code && ke.Retriable:
		return Retriable
	case code:
		return Refused
	}
	return Retriable
}

// settled returns the class of a failure after which the epoch goes on:
// Fenced, NotAuthorized, Closed or Misconfigured as on every path, and
// Refused for anything else: the call failed, and the pair stays.
func settled(err error) Class {
	switch {
	case fenced(err):
		return Fenced
	case denied(err):
		return NotAuthorized
	case closed(err):
		return Closed
	case errors.Is(err, kerr.InvalidTransactionTimeout):
		return Misconfigured
	}
	return Refused
}

// fenced reports a refusal of the producer pair.
func fenced(err error) bool {
	return errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.ProducerFenced) ||
		errors.Is(err, kerr.InvalidProducerIDMapping)
}

// denied reports a missing ACL.
func denied(err error) bool {
	return errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.TopicAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.GroupAuthorizationFailed)
}

// closed reports a call on a closed client, or on a closed [Wire].
func closed(err error) bool {
	if errors.Is(err, kgo.ErrClientClosed) {
		return true
	}
	var e *Error
	return errors.As(err, &e) && e.Class == Closed
}

// roleDenied reports a refusal of the transactional id or of the cluster
// (53, 31): no write under the epoch can land until an operator grants
// the ACL, so the epoch ends. A refused topic (29) fails the write only.
func roleDenied(err error) bool {
	return errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed)
}

// topicDenied reports a refused topic (29 TOPIC_AUTHORIZATION_FAILED).
func topicDenied(err error) bool { return errors.Is(err, kerr.TopicAuthorizationFailed) }

// producerStateRefused reports a broker's refusal of the epoch's producer
// state, which only a new epoch resets: 45 OUT_OF_ORDER_SEQUENCE_NUMBER,
// 59 UNKNOWN_PRODUCER_ID, 48 INVALID_TXN_STATE. The Java producer ends its
// transactional producer on these too.
func producerStateRefused(err error) bool {
	return errors.Is(err, kerr.OutOfOrderSequenceNumber) || errors.Is(err, kerr.UnknownProducerID) ||
		errors.Is(err, kerr.InvalidTxnState)
}

// busy reports 51 CONCURRENT_TRANSACTIONS: the coordinator still writes
// the markers of the previous transaction, and the request goes again
// (withConcurrentTransactions).
func busy(err error) bool { return errors.Is(err, kerr.ConcurrentTransactions) }

// coordinatorMoved reports a code with which a broker says that it is
// not, or not yet, the coordinator of a transactional id: 16
// NOT_COORDINATOR, 15 COORDINATOR_NOT_AVAILABLE, 14
// COORDINATOR_LOAD_IN_PROGRESS. It is safe for concurrent use.
func coordinatorMoved(err error) bool {
	return errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable) || coordinatorLoading(err)
}

// coordinatorLoading reports 14 COORDINATOR_LOAD_IN_PROGRESS: the node is
// the coordinator, and the request goes to it again.
func coordinatorLoading(err error) bool { return errors.Is(err, kerr.CoordinatorLoadInProgress) }

// coordinatorRefused reports a FindCoordinator answer that refused the
// transactional id (a missing ACL, an invalid id): a broker code that
// says nothing of where the coordinator is.
func coordinatorRefused(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && !coordinatorMoved(err)
}

// appended reports a leader's answer that the batch is in the log: no
// error, or 46 DUPLICATE_SEQUENCE_NUMBER (a repeat of a batch it
// appended).
func appended(err error) bool { return err == nil || errors.Is(err, kerr.DuplicateSequenceNumber) }

// notAppended reports a broker code with which a leader refuses a batch
// before it appends it, so that the batch's sequence number stays unused:
// a leader that moved or does not know the partition yet, too few in-sync
// replicas, a refused ACL or record, a refused token or sequence.
func notAppended(err error) bool {
	switch {
	case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.LeaderNotAvailable),
		errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID),
		errors.Is(err, kerr.NotEnoughReplicas), errors.Is(err, kerr.FencedLeaderEpoch),
		errors.Is(err, kerr.UnknownLeaderEpoch), errors.Is(err, kerr.CorruptMessage),
		errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge),
		errors.Is(err, kerr.InvalidRecord), errors.Is(err, kerr.InvalidTimestamp),
		errors.Is(err, kerr.PolicyViolation), errors.Is(err, kerr.InvalidRequiredAcks),
		errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed),
		errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.ProducerFenced),
		errors.Is(err, kerr.InvalidProducerIDMapping), errors.Is(err, kerr.InvalidTxnState),
		errors.Is(err, kerr.OutOfOrderSequenceNumber), errors.Is(err, kerr.UnknownProducerID),
		errors.Is(err, kerr.TransactionAbortable):
		return true
	}
	return false
}

// leaderless reports 5 LEADER_NOT_AVAILABLE: the partition exists, and an
// election is under way.
func leaderless(err error) bool { return errors.Is(err, kerr.LeaderNotAvailable) }

// leaderLookupTransient reports a failure to look up a partition's leader
// that the next round of the produce loop may not see: a Metadata request
// without an answer (a dead or unreachable broker) or with a retriable
// code, while ctx lasts. A topic that does not exist (after leaderCache's
// own retries), a partition outside the topic and a refused ACL fail the
// batch.
func leaderLookupTransient(ctx context.Context, err error) bool {
	return ctx.Err() == nil && Classify(PathMetadata, err) == Retriable
}

// notDialled reports a request that failed before it was written: the
// connection to the broker could not be dialled, so it carried nothing.
func notDialled(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// answerTimedOut reports a request that was written to a connection and
// whose answer did not come within the read timeout (or whose write timed
// out midway): the broker is alive, or was when the request left, and may
// still apply it later. One that could not be dialled carried nothing
// (notDialled); a connection that broke while the client read the answer
// is brokeWhileReading's (both: mayApplyLater).
func answerTimedOut(err error) bool {
	if notDialled(err) {
		return false
	}
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// mayApplyLater reports a request that was written to a connection, or
// may have been, and got no answer: its answer timed out
// (answerTimedOut), the connection broke while the client read it
// (brokeWhileReading), or it died with its connection while queued behind
// another request's answer (connectionDied). Either way the broker may
// still apply it after a resend of it was answered.
func mayApplyLater(err error) bool {
	return answerTimedOut(err) || brokeWhileReading(err) || connectionDied(err)
}

// chosenBrokerDead is the text of franz-go's unexported errChosenBrokerDead
// (kgo/errors.go), which it returns for a request whose connection died:
// both one never written (its broker retired, or its connection died
// while it waited to be written) and one written behind another request
// whose read failed, queued for its answer. franz-go gives the two the one
// error. TestPipelinedRequestBehindAFailedReadCountsAsWritten pins the
// text: it fails when franz-go words it otherwise.
const chosenBrokerDead = "the broker connection has died and the request will be retried on a new connection"

// connectionDied reports franz-go's errChosenBrokerDead anywhere in err's
// tree. The transport cannot prove that such a request was not written,
// and straight to Kafka a written one is lost with the socket (the broker
// reads a connection's requests one at a time), but a proxy or load
// balancer that read it ahead delivers it on its own connection to the
// broker, which applies it. So it counts as written (mayApplyLater): the
// rule is that a request counts as not sent only when the transport can
// prove it (notDialled).
func connectionDied(err error) bool {
	if err == nil || notDialled(err) {
		return false
	}
	found := false
	var walk func(error)
	walk = func(e error) {
		if e == nil || found {
			return
		}
		if e.Error() == chosenBrokerDead {
			found = true
			return
		}
		if many, ok := e.(interface{ Unwrap() []error }); ok { //nolint:errorlint // the walk itself unwraps, one level at a time
			for _, inner := range many.Unwrap() {
				walk(inner)
			}
			return
		}
		walk(errors.Unwrap(e))
	}
	walk(err)
	return found
}

// brokeWhileReading reports a connection that broke after the request was
// written whole, while the client waited for its answer: an EOF, or a read
// that failed (a reset). Kafka's SocketServer queues a request that it
// read whole on its RequestChannel, and a request handler applies it
// whether or not the connection is still open (only the answer is
// dropped); a TCP proxy or load balancer between client and broker may
// break the client's side while its own connection still delivers the
// request. A killed broker applies nothing later, but the client cannot
// tell the two apart. A write that failed sent no whole request, and a
// dial carried nothing.
func brokeWhileReading(err error) bool {
	if err == nil || notDialled(err) {
		return false
	}
	var first *kgo.ErrFirstReadEOF
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &first) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "read"
}

// logMoved reports 1 OFFSET_OUT_OF_RANGE: the log start moved past the
// offset (retention, DeleteRecords), or the log was truncated below it.
func logMoved(err error) bool { return errors.Is(err, kerr.OffsetOutOfRange) }

// sessionRefused reports a refusal of a fetch session (70
// FETCH_SESSION_ID_NOT_FOUND, 71 INVALID_FETCH_SESSION_EPOCH): the next
// Fetch opens a new one, and nothing failed.
func sessionRefused(err error) bool {
	return errors.Is(err, kerr.FetchSessionIDNotFound) || errors.Is(err, kerr.InvalidFetchSessionEpoch)
}

// topicExists reports 36 TOPIC_ALREADY_EXISTS.
func topicExists(err error) bool { return errors.Is(err, kerr.TopicAlreadyExists) }

// txnIDNotFound reports 105 TRANSACTIONAL_ID_NOT_FOUND: the coordinator
// does not know the transactional id.
func txnIDNotFound(err error) bool { return errors.Is(err, kerr.TransactionalIDNotFound) }

// contextEnded reports the end of a context, the caller's or a request's.
func contextEnded(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// codeError returns the error of a broker code of an answer, nil for 0.
func codeError(code int16) error { return kerr.ErrorForCode(code) }

// The broker codes that the package puts into an error of its own, so that
// Classify reads it as it reads the broker's answer.
var (
	errMissing       = kerr.UnknownTopicOrPartition // a topic or partition that an answer omits
	errLeaderless    = kerr.LeaderNotAvailable      // a partition without a leader
	errNoCoordinator = kerr.CoordinatorNotAvailable // a FindCoordinator answer that omits the id
	errUnknownAnswer = kerr.UnknownServerError      // an answer that omits a partition of the request
	errTxnIDNotFound = kerr.TransactionalIDNotFound // a DescribeTransactions answer that omits the id
)
