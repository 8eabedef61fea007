package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file builds and sends the raw requests of a transaction under the
// epoch's pair: AddPartitionsToTxn and EndTxn to the transactional id's
// coordinator (through the coordinator cache, again while the coordinator
// answers CONCURRENT_TRANSACTIONS), and Produce to a partition's leader.

// addPartitions adds the partitions of a transaction to it at the
// coordinator, with one AddPartitionsToTxn (version 3, the last client
// version), again while the coordinator answers CONCURRENT_TRANSACTIONS:
// the markers of the previous transaction are still being written.
func (e *Epoch) addPartitions(ctx context.Context, parts []*partitionBatches) error {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID = e.txnID
	req.ProducerID, req.ProducerEpoch = e.producer.ID, e.producer.Epoch
	for _, p := range parts {
		i := slices.IndexFunc(req.Topics, func(topic kmsg.AddPartitionsToTxnRequestTopic) bool { return topic.Topic == p.partition.Topic })
		if i < 0 {
			topic := kmsg.NewAddPartitionsToTxnRequestTopic()
			topic.Topic = p.partition.Topic
			req.Topics = append(req.Topics, topic)
			i = len(req.Topics) - 1
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p.partition.Partition)
	}
	defer e.noteCoordinatorCopy(PathAddPartitions)
	return withConcurrentTransactions(ctx, func() error {
		kresp, err := e.wire.coords.requestTracked(ctx, req.TransactionalID, func() kmsg.Request { return req }, func(kresp kmsg.Response) error {
			for _, topic := range kresp.(*kmsg.AddPartitionsToTxnResponse).Topics {
				for _, p := range topic.Partitions {
					if err := codeError(p.ErrorCode); coordinatorMoved(err) {
						return err
					}
				}
			}
			return nil
		}, &e.coordCopies)
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
		var refused []error
		answered := 0
		for _, topic := range resp.Topics {
			answered += len(topic.Partitions)
			for _, p := range topic.Partitions {
				err := codeError(p.ErrorCode)
				switch {
				case err == nil:
				case busy(err):
					return err
				case Classify(PathAddPartitions, err) == Retriable:
					// OPERATION_NOT_ATTEMPTED: another partition failed.
				default:
					refused = append(refused, topicError(topic.Topic, err))
				}
			}
		}
		if answered < len(parts) {
			// An answer without a partition of the request added nothing
			// that the transaction can count on.
			refused = append(refused, fmt.Errorf("the AddPartitionsToTxn answer names %d of the %d partitions of the transaction: %w", answered, len(parts), errUnknownAnswer))
		}
		return errors.Join(refused...)
	})
}

// endTxn sends EndTxn (version 4: the coordinator keeps the epoch) to
// commit or abort the open transaction of the epoch, again while the
// coordinator answers CONCURRENT_TRANSACTIONS. An attempt that got no
// answer, unless another node answered as the coordinator since
// (unansweredAt), is noted (noteUnanswered): the epoch begins no
// transaction after this one.
func (e *Epoch) endTxn(ctx context.Context, commit bool) error {
	path := PathAbort
	if commit {
		path = PathCommit
	}
	defer e.noteCoordinatorCopy(path)
	return withConcurrentTransactions(ctx, func() error {
		_, err := e.wire.coords.requestTracked(ctx, e.txnID, func() kmsg.Request {
			req := kmsg.NewPtrEndTxnRequest()
			req.TransactionalID = e.txnID
			req.ProducerID, req.ProducerEpoch = e.producer.ID, e.producer.Epoch
			req.Commit = commit
			return req
		}, func(resp kmsg.Response) error {
			return codeError(resp.(*kmsg.EndTxnResponse).ErrorCode)
		}, &e.coordCopies)
		return err
	})
}

// produceRequest builds the transactional Produce of the head batch of
// each of parts: acks=all, the transactional id of the epoch.
func (e *Epoch) produceRequest(parts []*partitionBatches) *kmsg.ProduceRequest {
	txnID := e.txnID
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID = &txnID
	req.Acks = -1
	req.TimeoutMillis = produceTimeoutMillis
	for _, p := range parts {
		i := slices.IndexFunc(req.Topics, func(topic kmsg.ProduceRequestTopic) bool { return topic.Topic == p.partition.Topic })
		if i < 0 {
			topic := kmsg.NewProduceRequestTopic()
			topic.Topic = p.partition.Topic
			req.Topics = append(req.Topics, topic)
			i = len(req.Topics) - 1
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p.partition.Partition
		rp.Records = p.encoded
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

// produceCodes is the broker code of each partition of a Produce answer.
type produceCodes map[Partition]int16

// of returns the error of the partition's code, and whether the answer
// names the partition.
func (c produceCodes) of(p Partition) (error, bool) {
	code, ok := c[p]
	return codeError(code), ok
}

// sendProduce sends req to leader over the transactional client, in one
// attempt, and returns the code of each partition of its answer.
func (w *Wire) sendProduce(ctx context.Context, leader int32, req *kmsg.ProduceRequest) (produceCodes, error) {
	kresp, err := w.txn.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return nil, err
	}
	codes := make(produceCodes)
	for _, topic := range kresp.(*kmsg.ProduceResponse).Topics {
		for _, rp := range topic.Partitions {
			codes[Partition{Topic: topic.Topic, Partition: rp.Partition}] = rp.ErrorCode
		}
	}
	return codes, nil
}
