// Package kafkacodes is the table of the error codes that Kafka documents
// for each request the library sends, and the answer of a request that
// carries one: the request nemesis's error codes, on kfake
// (internal/kfakefault) and on a real broker (internal/chaos's proxy).
//
// The codes of each request are those of Kafka's request documentation
// (the "Possible error codes" of each *Response class, and the
// protocol guide) that a broker answers to a client of that request;
// whether a code is retriable is kerr's (Kafka's RetriableException).
// It imports kmsg and kerr only.
package kafkacodes

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Codes is the table: for each API key the library sends, every error code
// Kafka documents for its answer, retriable and fatal. CreateTopics is
// there for krabka-coord create-topic; the members never send it.
var Codes = map[kmsg.Key][]*kerr.Error{
	kmsg.Produce: {
		kerr.CorruptMessage, kerr.UnknownTopicOrPartition, kerr.NotLeaderForPartition, kerr.LeaderNotAvailable,
		kerr.MessageTooLarge, kerr.InvalidTopicException, kerr.RecordListTooLarge, kerr.NotEnoughReplicas,
		kerr.NotEnoughReplicasAfterAppend, kerr.InvalidRequiredAcks, kerr.TopicAuthorizationFailed,
		kerr.UnsupportedForMessageFormat, kerr.InvalidProducerEpoch, kerr.ClusterAuthorizationFailed,
		kerr.TransactionalIDAuthorizationFailed, kerr.InvalidRecord, kerr.InvalidTxnState,
		kerr.InvalidProducerIDMapping, kerr.OutOfOrderSequenceNumber, kerr.UnknownProducerID, kerr.KafkaStorageError, kerr.RequestTimedOut, kerr.InvalidTimestamp,
		kerr.ProducerFenced, kerr.UnknownTopicID, kerr.TransactionAbortable, kerr.UnknownServerError,
	},
	kmsg.Fetch: {
		kerr.OffsetOutOfRange, kerr.UnknownTopicOrPartition, kerr.NotLeaderForPartition, kerr.ReplicaNotAvailable,
		kerr.KafkaStorageError, kerr.FencedLeaderEpoch, kerr.UnknownLeaderEpoch, kerr.TopicAuthorizationFailed,
		kerr.UnknownTopicID, kerr.InconsistentTopicID, kerr.FetchSessionIDNotFound, kerr.InvalidFetchSessionEpoch,
		kerr.CorruptMessage, kerr.OffsetNotAvailable, kerr.UnknownServerError,
	},
	kmsg.ListOffsets: {
		kerr.UnknownTopicOrPartition, kerr.NotLeaderForPartition, kerr.LeaderNotAvailable, kerr.FencedLeaderEpoch,
		kerr.UnknownLeaderEpoch, kerr.OffsetNotAvailable, kerr.TopicAuthorizationFailed, kerr.KafkaStorageError,
		kerr.UnsupportedForMessageFormat, kerr.UnknownServerError,
	},
	kmsg.Metadata: {
		kerr.UnknownTopicOrPartition, kerr.LeaderNotAvailable, kerr.TopicAuthorizationFailed,
		kerr.InvalidTopicException, kerr.UnknownTopicID, kerr.UnknownServerError,
	},
	kmsg.FindCoordinator: {
		kerr.CoordinatorNotAvailable, kerr.NotCoordinator, kerr.CoordinatorLoadInProgress,
		kerr.TransactionalIDAuthorizationFailed, kerr.GroupAuthorizationFailed, kerr.InvalidRequest,
		kerr.UnknownServerError,
	},
	kmsg.ApiVersions: {kerr.UnsupportedVersion, kerr.InvalidRequest},
	kmsg.CreateTopics: {
		kerr.TopicAlreadyExists, kerr.InvalidPartitions, kerr.InvalidReplicationFactor, kerr.InvalidConfig,
		kerr.NotController, kerr.ClusterAuthorizationFailed, kerr.TopicAuthorizationFailed, kerr.PolicyViolation,
		kerr.RequestTimedOut, kerr.InvalidTopicException, kerr.UnknownServerError,
	},
	kmsg.InitProducerID: {
		kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress, kerr.ConcurrentTransactions,
		kerr.TransactionalIDAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.InvalidProducerEpoch,
		kerr.ProducerFenced, kerr.InvalidTransactionTimeout, kerr.InvalidProducerIDMapping, kerr.UnknownServerError,
	},
	kmsg.AddPartitionsToTxn: {
		kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress, kerr.ConcurrentTransactions,
		kerr.InvalidTxnState, kerr.InvalidProducerIDMapping, kerr.InvalidProducerEpoch, kerr.ProducerFenced,
		kerr.TopicAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed, kerr.UnknownTopicOrPartition,
		kerr.OperationNotAttempted, kerr.TransactionAbortable, kerr.UnknownServerError,
	},
	kmsg.EndTxn: {
		kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress, kerr.ConcurrentTransactions,
		kerr.InvalidTxnState, kerr.InvalidProducerIDMapping, kerr.InvalidProducerEpoch, kerr.ProducerFenced,
		kerr.TransactionalIDAuthorizationFailed, kerr.TransactionAbortable, kerr.UnknownServerError,
	},
	kmsg.DescribeConfigs: {
		kerr.UnknownTopicOrPartition, kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed,
		kerr.InvalidRequest, kerr.UnknownServerError,
	},
	kmsg.DescribeTransactions: {
		kerr.CoordinatorNotAvailable, kerr.NotCoordinator, kerr.CoordinatorLoadInProgress,
		kerr.TransactionalIDNotFound, kerr.TransactionalIDAuthorizationFailed, kerr.UnknownServerError,
	},
}

// Applied lists, for the keys that have them, the codes with which a
// broker may answer a request that it applied (or whose effect may still
// be applied): a Produce whose batch is in the leader's log but not yet on
// enough replicas (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND), a
// Produce of a batch the leader appended before (DUPLICATE_SEQUENCE_NUMBER:
// it says "already in the log", so it is never answered to a batch the
// broker did not apply, and is in Applied only),
// and a request of a transaction coordinator whose append to the
// transaction log is in the leader's log but failed its replication or
// lost its leadership, which Kafka's TransactionStateManager answers
// COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR. The proxy's
// "applied-error" mode forwards the request and answers it with one of
// these: a second fault, beside a request answered without being applied.
var Applied = map[kmsg.Key][]*kerr.Error{
	kmsg.Produce:            {kerr.RequestTimedOut, kerr.NotEnoughReplicasAfterAppend, kerr.DuplicateSequenceNumber},
	kmsg.InitProducerID:     {kerr.CoordinatorNotAvailable, kerr.NotCoordinator},
	kmsg.AddPartitionsToTxn: {kerr.CoordinatorNotAvailable, kerr.NotCoordinator},
	kmsg.EndTxn:             {kerr.CoordinatorNotAvailable, kerr.NotCoordinator},
}

// Of returns the codes of key in the table, retriable first, each group in
// the table's order; nil for a key the table does not hold.
func Of(key int16) []*kerr.Error {
	codes := slices.Clone(Codes[kmsg.Key(key)])
	slices.SortStableFunc(codes, func(a, b *kerr.Error) int {
		switch {
		case a.Retriable == b.Retriable:
			return 0
		case a.Retriable:
			return -1
		}
		return 1
	})
	return codes
}

// AppliedOf returns the codes of Applied for key, nil for none.
func AppliedOf(key int16) []*kerr.Error { return slices.Clone(Applied[kmsg.Key(key)]) }

// ErrorResponse builds the answer of req, at req's version, that carries
// code in every error field of the answer's kind, for every topic,
// partition, resource or id that req names: the request answered with an
// error code. The keys it knows are those of [Codes]; another key is an
// error.
func ErrorResponse(req kmsg.Request, code int16) (kmsg.Response, error) {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	switch r := req.(type) {
	case *kmsg.InitProducerIDRequest:
		out := resp.(*kmsg.InitProducerIDResponse)
		out.ErrorCode, out.ProducerID, out.ProducerEpoch = code, -1, -1
	case *kmsg.EndTxnRequest:
		resp.(*kmsg.EndTxnResponse).ErrorCode = code
	case *kmsg.AddPartitionsToTxnRequest:
		out := resp.(*kmsg.AddPartitionsToTxnResponse)
		if r.GetVersion() >= 4 {
			out.ErrorCode = code
			for _, txn := range r.Transactions {
				rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
				rt.TransactionalID = txn.TransactionalID
				for _, t := range txn.Topics {
					tt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
					tt.Topic = t.Topic
					for _, p := range t.Partitions {
						tp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
						tp.Partition, tp.ErrorCode = p, code
						tt.Partitions = append(tt.Partitions, tp)
					}
					rt.Topics = append(rt.Topics, tt)
				}
				out.Transactions = append(out.Transactions, rt)
			}
			break
		}
		for _, t := range r.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.ProduceRequest:
		out := resp.(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.BaseOffset = p.Partition, code, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.FetchRequest:
		out := resp.(*kmsg.FetchResponse)
		out.SessionID = r.SessionID
		switch {
		case errors.Is(kerr.ErrorForCode(code), kerr.FetchSessionIDNotFound),
			errors.Is(kerr.ErrorForCode(code), kerr.InvalidFetchSessionEpoch):
			out.ErrorCode, out.SessionID = code, 0 // a session's code is the answer's, with no topic
		default:
			for _, t := range r.Topics {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				for _, p := range t.Partitions {
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.HighWatermark = p.Partition, code, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
		}
	case *kmsg.ListOffsetsRequest:
		out := resp.(*kmsg.ListOffsetsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.Offset = p.Partition, code, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.MetadataRequest:
		out := resp.(*kmsg.MetadataResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.FindCoordinatorRequest:
		out := resp.(*kmsg.FindCoordinatorResponse)
		out.ErrorCode, out.NodeID = code, -1
		keys := r.CoordinatorKeys
		if len(keys) == 0 {
			keys = []string{r.CoordinatorKey}
		}
		for _, key := range keys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.ErrorCode, c.NodeID = key, code, -1
			out.Coordinators = append(out.Coordinators, c)
		}
	case *kmsg.ApiVersionsRequest:
		resp.(*kmsg.ApiVersionsResponse).ErrorCode = code
	case *kmsg.CreateTopicsRequest:
		out := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.NumPartitions, rt.ReplicationFactor = t.Topic, code, -1, -1
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.DescribeConfigsRequest:
		out := resp.(*kmsg.DescribeConfigsResponse)
		for _, res := range r.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
			out.Resources = append(out.Resources, rr)
		}
	case *kmsg.DescribeTransactionsRequest:
		out := resp.(*kmsg.DescribeTransactionsResponse)
		for _, id := range r.TransactionalIDs {
			s := kmsg.NewDescribeTransactionsResponseTransactionState()
			s.TransactionalID, s.ErrorCode = id, code
			out.TransactionStates = append(out.TransactionStates, s)
		}
	default:
		return nil, fmt.Errorf("kafkacodes: no error answer for %s (key %d)", kmsg.NameForKey(req.Key()), req.Key())
	}
	return resp, nil
}
