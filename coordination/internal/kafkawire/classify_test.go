package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The table test of the classifier: every request path against the broker
// codes and the other errors that it meets, and the class that Classify
// gives each. The expected classes are written out by hand, one column a
// path, from what each path's caller does with the answer (see Classify's
// doc): a change of the classifier changes a cell here, on purpose.

// Short names of the classes, so that a row of the table fits a line.
const (
	ret  = Retriable
	ref  = Refused
	can  = Canceled
	miss = Missing
	fen  = Fenced
	lost = ProducerLost
	unk  = OutcomeUnknown
	auth = NotAuthorized
	conf = Misconfigured
	cls  = Closed
)

// paths is every request path, in the order of the table's columns.
var paths = [...]Path{
	PathMint, PathAddPartitions, PathProduce, PathCommit, PathAbort,
	PathAppend, PathFetch, PathMetadata, PathCoordinator, PathAdmin,
}

// byPath is the class of one error on each path, in the order of paths.
type byPath [len(paths)]Class

// all is the row of an error that means the same on every path.
func all(c Class) byPath {
	var row byPath
	for i := range row {
		row[i] = c
	}
	return row
}

var (
	errDialRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	errReadReset   = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
)

var classifyCases = []struct {
	name string
	err  error
	want byPath
}{
	//                                                   Mint  AddP  Prod  Commit Abort Append Fetch Meta  Coord Admin
	// The fence codes: a newer epoch exists, on every path.
	{"47 INVALID_PRODUCER_EPOCH", kerr.InvalidProducerEpoch, all(fen)},
	{"90 PRODUCER_FENCED", kerr.ProducerFenced, all(fen)},
	{"49 INVALID_PRODUCER_ID_MAPPING", kerr.InvalidProducerIDMapping, all(fen)},

	// A missing ACL; an abort that is refused leaves a transaction that
	// only a new epoch clears.
	{"53 TRANSACTIONAL_ID_AUTHORIZATION_FAILED", kerr.TransactionalIDAuthorizationFailed, byPath{auth, auth, auth, auth, lost, auth, auth, auth, auth, auth}},
	{"29 TOPIC_AUTHORIZATION_FAILED", kerr.TopicAuthorizationFailed, byPath{auth, auth, auth, auth, lost, auth, auth, auth, auth, auth}},
	{"31 CLUSTER_AUTHORIZATION_FAILED", kerr.ClusterAuthorizationFailed, byPath{auth, auth, auth, auth, lost, auth, auth, auth, auth, auth}},
	{"30 GROUP_AUTHORIZATION_FAILED", kerr.GroupAuthorizationFailed, byPath{auth, auth, auth, auth, lost, auth, auth, auth, auth, auth}},

	// A coordinator that moved or loads: retried, but a commit that meets
	// it may have landed.
	{"16 NOT_COORDINATOR", kerr.NotCoordinator, byPath{ret, ret, ret, unk, lost, ret, ret, ret, ret, ret}},
	{"15 COORDINATOR_NOT_AVAILABLE", kerr.CoordinatorNotAvailable, byPath{ret, ret, ret, unk, lost, ret, ret, ret, ret, ret}},
	{"14 COORDINATOR_LOAD_IN_PROGRESS", kerr.CoordinatorLoadInProgress, byPath{ret, ret, ret, unk, lost, ret, ret, ret, ret, ret}},

	// CONCURRENT_TRANSACTIONS is not retriable to kerr, but the two
	// coordinator requests that meet it wait it out. A Produce that meets
	// it (no leader sends it) leaves the batch's fate unknown.
	{"51 CONCURRENT_TRANSACTIONS", kerr.ConcurrentTransactions, byPath{ret, ret, lost, unk, lost, ref, ref, ref, ref, ref}},

	// A partition leader's retriable codes. AddPartitionsToTxn goes to the
	// coordinator, which never sends them: any code but its own is a
	// refusal there.
	{"6 NOT_LEADER_OR_FOLLOWER", kerr.NotLeaderForPartition, byPath{ret, ref, ret, unk, lost, ret, ret, ret, ret, ret}},
	{"5 LEADER_NOT_AVAILABLE", kerr.LeaderNotAvailable, byPath{ret, ref, ret, unk, lost, ret, ret, ret, ret, ret}},
	{"7 REQUEST_TIMED_OUT", kerr.RequestTimedOut, byPath{ret, ref, ret, unk, lost, ret, ret, ret, ret, ret}},
	{"13 NETWORK_EXCEPTION", kerr.NetworkException, byPath{ret, ref, ret, unk, lost, ret, ret, ret, ret, ret}},
	{"19 NOT_ENOUGH_REPLICAS", kerr.NotEnoughReplicas, byPath{ret, ref, ret, unk, lost, ret, ret, ret, ret, ret}},
	{"20 NOT_ENOUGH_REPLICAS_AFTER_APPEND", kerr.NotEnoughReplicasAfterAppend, byPath{ret, ref, ret, unk, lost, ret, ret, ret, ret, ret}},
	{"74 FENCED_LEADER_EPOCH", kerr.FencedLeaderEpoch, byPath{ret, ref, ret, unk, lost, ret, ret, ret, ret, ret}},

	// A topic or partition that does not exist: Missing to the lookups,
	// a leader that does not know it yet to a Produce.
	{"3 UNKNOWN_TOPIC_OR_PARTITION", kerr.UnknownTopicOrPartition, byPath{ret, ref, ret, unk, lost, ret, miss, miss, ret, miss}},
	{"100 UNKNOWN_TOPIC_ID", kerr.UnknownTopicID, byPath{ret, ref, ret, unk, lost, ret, ret, ret, ret, ret}},

	// The producer state that only a new epoch resets, to a Produce; an
	// abort with nothing open is refused, and the epoch stays.
	{"48 INVALID_TXN_STATE", kerr.InvalidTxnState, byPath{ref, ref, lost, unk, ref, ref, ref, ref, ref, ref}},
	{"45 OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.OutOfOrderSequenceNumber, byPath{ref, ref, lost, unk, lost, ref, ref, ref, ref, ref}},
	{"59 UNKNOWN_PRODUCER_ID", kerr.UnknownProducerID, byPath{ref, ref, lost, unk, lost, ref, ref, ref, ref, ref}},

	// The transaction, not the pair, is refused: a commit aborts and
	// keeps the pair; a batch refused before its append is a refusal.
	{"120 TRANSACTION_ABORTABLE", kerr.TransactionAbortable, byPath{ref, ref, ref, ret, lost, ref, ref, ref, ref, ref}},

	// A transaction timeout above transaction.max.timeout.ms.
	{"50 INVALID_TRANSACTION_TIMEOUT", kerr.InvalidTransactionTimeout, byPath{conf, conf, conf, unk, lost, conf, conf, conf, conf, conf}},

	// The coordinator's answer for a partition that it did not get to.
	{"55 OPERATION_NOT_ATTEMPTED", kerr.OperationNotAttempted, byPath{ref, ret, lost, unk, lost, ref, ref, ref, ref, ref}},

	// A record that a leader refuses before the append: the sequence
	// number stays unused, and the call fails.
	{"10 MESSAGE_TOO_LARGE", kerr.MessageTooLarge, byPath{ref, ref, ref, unk, lost, ref, ref, ref, ref, ref}},
	{"87 INVALID_RECORD", kerr.InvalidRecord, byPath{ref, ref, ref, unk, lost, ref, ref, ref, ref, ref}},
	{"2 CORRUPT_MESSAGE", kerr.CorruptMessage, byPath{ret, ref, ret, unk, lost, ret, ret, ret, ret, ret}},

	// Codes that the paths do not expect. To a Produce the batch may be in
	// the log (the produce loop takes 46 as appended before it asks); the
	// fetch loop takes 1 as a moved log start before it asks; a mint takes
	// 105 as an id without a transaction before it asks.
	{"46 DUPLICATE_SEQUENCE_NUMBER", kerr.DuplicateSequenceNumber, byPath{ref, ref, lost, unk, lost, ref, ref, ref, ref, ref}},
	{"-1 UNKNOWN_SERVER_ERROR", kerr.UnknownServerError, byPath{ref, ref, lost, unk, lost, ref, ref, ref, ref, ref}},
	{"42 INVALID_REQUEST", kerr.InvalidRequest, byPath{ref, ref, lost, unk, lost, ref, ref, ref, ref, ref}},
	{"1 OFFSET_OUT_OF_RANGE", kerr.OffsetOutOfRange, byPath{ref, ref, lost, unk, lost, ref, ref, ref, ref, ref}},
	{"105 TRANSACTIONAL_ID_NOT_FOUND", kerr.TransactionalIDNotFound, byPath{ref, ref, lost, unk, lost, ref, ref, ref, ref, ref}},

	// No answer at all. The request may have reached the coordinator
	// (AddPartitionsToTxn, EndTxn), or not; a Produce goes again as it is.
	{"connection refused (dial)", errDialRefused, byPath{ret, unk, ret, unk, lost, ret, ret, ret, ret, ret}},
	{"connection reset (read)", errReadReset, byPath{ret, unk, ret, unk, lost, ret, ret, ret, ret, ret}},
	{"io.EOF", io.EOF, byPath{ret, unk, ret, unk, lost, ret, ret, ret, ret, ret}},
	{"io.ErrUnexpectedEOF wrapped", fmt.Errorf("read answer: %w", io.ErrUnexpectedEOF), byPath{ret, unk, ret, unk, lost, ret, ret, ret, ret, ret}},

	// The end of a context: a mint stops; the loops of the other paths
	// check their context themselves, and see no code here.
	{"context.Canceled", context.Canceled, byPath{can, unk, ret, unk, lost, ret, ret, ret, ret, ret}},
	{"context.DeadlineExceeded", context.DeadlineExceeded, byPath{can, unk, ret, unk, lost, ret, ret, ret, ret, ret}},

	// A closed client or Wire. AddPartitionsToTxn may have opened the
	// transaction before the close, so its outcome is unknown.
	{"kgo.ErrClientClosed", kgo.ErrClientClosed, byPath{cls, unk, cls, unk, lost, cls, cls, cls, cls, cls}},
	{"a closed Wire", errClosed, byPath{cls, unk, cls, unk, lost, cls, cls, cls, cls, cls}},

	// Wrapped and joined: the classifier looks through both, and a fence
	// beats anything that comes with it.
	{"fence wrapped", fmt.Errorf("produce t-0: %w", kerr.ProducerFenced), all(fen)},
	{"fence inside an Error", &Error{Op: "write", Class: Retriable, Err: kerr.InvalidProducerEpoch}, all(fen)},
	{"coordinator code inside an Error", &Error{Op: "write", Err: kerr.NotCoordinator}, byPath{ret, ret, ret, unk, lost, ret, ret, ret, ret, ret}},
	{"context and fence joined", errors.Join(context.Canceled, kerr.ProducerFenced), all(fen)},
	{"fence after INVALID_TXN_STATE", errors.Join(kerr.InvalidTxnState, kerr.ProducerFenced), all(fen)},
	{"denial after a coordinator code", errors.Join(kerr.NotCoordinator, kerr.TopicAuthorizationFailed), byPath{auth, auth, auth, auth, lost, auth, auth, auth, auth, auth}},
	// A mint's "ctx ended (last error: ...)": the context wins over the code.
	{"context with a retriable code", fmt.Errorf("%w (last error: %w)", context.DeadlineExceeded, kerr.RequestTimedOut), byPath{can, ref, ret, unk, lost, ret, ret, ret, ret, ret}},
	{"closed with TRANSACTION_ABORTABLE", errors.Join(kgo.ErrClientClosed, kerr.TransactionAbortable), byPath{cls, ref, cls, ret, lost, cls, cls, cls, cls, cls}},
}

func TestClassify(t *testing.T) {
	for _, c := range classifyCases {
		for i, path := range paths {
			if got := Classify(path, c.err); got != c.want[i] {
				t.Errorf("Classify(%v, %s) = %v, want %v", path, c.name, got, c.want[i])
			}
		}
	}
}

// TestClassifyTableCoversEveryPath keeps the table's columns in step with
// the paths: a new Path needs a column (and its rows) above.
func TestClassifyTableCoversEveryPath(t *testing.T) {
	for i, path := range paths {
		if int(path) != i {
			t.Errorf("column %d is %v (%d); the columns follow the order of the Path constants", i, path, path)
		}
	}
	if next := Path(len(paths)); !strings.HasPrefix(next.String(), "path ") {
		t.Errorf("Path %d is %q, which the table has no column for", len(paths), next)
	}
	for _, path := range paths {
		if strings.HasPrefix(path.String(), "path ") {
			t.Errorf("Path %d has no name", path)
		}
	}
	for c := Retriable; c <= Closed; c++ {
		if strings.HasPrefix(c.String(), "class ") {
			t.Errorf("Class %d has no name", c)
		}
	}
	if next := Closed + 1; !strings.HasPrefix(next.String(), "class ") {
		t.Errorf("Class %d is %q, which this test does not know", next, next)
	}
}

// TestBookkeepingPredicates checks the predicates with which the machinery
// keeps its own state (a batch's sequence number, a coordinator that
// moved, the class of a failure after which the epoch goes on) on the
// codes that decide them.
func TestBookkeepingPredicates(t *testing.T) {
	cases := []struct {
		name                                string
		err                                 error
		appended, notAppended, moved, state bool
		settled                             Class
	}{
		{"no error", nil, true, false, false, false, ref},
		{"46 DUPLICATE_SEQUENCE_NUMBER", kerr.DuplicateSequenceNumber, true, false, false, false, ref},
		{"6 NOT_LEADER_OR_FOLLOWER", kerr.NotLeaderForPartition, false, true, false, false, ref},
		{"3 UNKNOWN_TOPIC_OR_PARTITION", kerr.UnknownTopicOrPartition, false, true, false, false, ref},
		{"10 MESSAGE_TOO_LARGE", kerr.MessageTooLarge, false, true, false, false, ref},
		{"90 PRODUCER_FENCED", kerr.ProducerFenced, false, true, false, false, fen},
		{"29 TOPIC_AUTHORIZATION_FAILED", kerr.TopicAuthorizationFailed, false, true, false, false, auth},
		{"45 OUT_OF_ORDER_SEQUENCE_NUMBER", kerr.OutOfOrderSequenceNumber, false, true, false, true, ref},
		{"48 INVALID_TXN_STATE", kerr.InvalidTxnState, false, true, false, true, ref},
		{"59 UNKNOWN_PRODUCER_ID", kerr.UnknownProducerID, false, true, false, true, ref},
		{"7 REQUEST_TIMED_OUT", kerr.RequestTimedOut, false, false, false, false, ref},
		{"20 NOT_ENOUGH_REPLICAS_AFTER_APPEND", kerr.NotEnoughReplicasAfterAppend, false, false, false, false, ref},
		{"-1 UNKNOWN_SERVER_ERROR", kerr.UnknownServerError, false, false, false, false, ref},
		{"16 NOT_COORDINATOR", kerr.NotCoordinator, false, false, true, false, ref},
		{"15 COORDINATOR_NOT_AVAILABLE", kerr.CoordinatorNotAvailable, false, false, true, false, ref},
		{"14 COORDINATOR_LOAD_IN_PROGRESS", kerr.CoordinatorLoadInProgress, false, false, true, false, ref},
		{"50 INVALID_TRANSACTION_TIMEOUT", kerr.InvalidTransactionTimeout, false, false, false, false, conf},
		{"kgo.ErrClientClosed", kgo.ErrClientClosed, false, false, false, false, cls},
		{"a connection reset", errReadReset, false, false, false, false, ref},
	}
	for _, c := range cases {
		if got := appended(c.err); got != c.appended {
			t.Errorf("appended(%s) = %v, want %v", c.name, got, c.appended)
		}
		if got := notAppended(c.err); got != c.notAppended {
			t.Errorf("notAppended(%s) = %v, want %v", c.name, got, c.notAppended)
		}
		if got := coordinatorMoved(c.err); got != c.moved {
			t.Errorf("coordinatorMoved(%s) = %v, want %v", c.name, got, c.moved)
		}
		if got := producerStateRefused(c.err); got != c.state {
			t.Errorf("producerStateRefused(%s) = %v, want %v", c.name, got, c.state)
		}
		if c.err == nil {
			continue
		}
		if got := settled(c.err); got != c.settled {
			t.Errorf("settled(%s) = %v, want %v", c.name, got, c.settled)
		}
	}
	// A refused FindCoordinator: a code that says nothing of where the
	// coordinator is. A code of a move, or no code, says it may be elsewhere.
	for err, want := range map[error]bool{
		kerr.TransactionalIDAuthorizationFailed: true, kerr.InvalidRequest: true,
		kerr.NotCoordinator: false, kerr.CoordinatorLoadInProgress: false, errDialRefused: false,
	} {
		if got := coordinatorRefused(err); got != want {
			t.Errorf("coordinatorRefused(%v) = %v, want %v", err, got, want)
		}
	}
}
