package kafkawire

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds the Consumer: a franz-go consumer of the caller's own
// topics with read_committed isolation, which hands out each record with
// the producer pair of its batch.

// Consumer reads topics with read_committed isolation, so it yields only
// records of committed transactions, each with the producer id and epoch
// of its record batch. It is one consumer: call Poll from one goroutine at
// a time; Close is safe from any goroutine, and more than once.
type Consumer struct {
	client *kgo.Client
	topics []string
}

// NewConsumer consumes topics from brokers. Without a consumer option it
// reads every partition of the topics from the start; the options (a
// consumer group, a reset offset, connection settings) come before the
// seed brokers, the topics and read_committed isolation, which the
// consumer sets. It opens no connection; the first poll does. It returns
// the error of an option that kgo rejects.
func NewConsumer(topics []string, options []kgo.Opt, brokers []string) (*Consumer, error) {
	all := append([]kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, options...)
	all = append(slices.Clone(all),
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	client, err := kgo.NewClient(all...)
	if err != nil {
		return nil, err
	}
	return &Consumer{client: client, topics: slices.Clone(topics)}, nil
}

// Failure is a fetch of a partition that failed; the consumer goes on, as
// franz-go retries fetches itself.
type Failure struct {
	// Partition is the partition whose fetch failed.
	Partition Partition
	// Err is the fetch's error.
	Err error
}

// Poll waits for the next records, each partition's in offset order, and
// returns them with the fetches that failed (a failure that is only the
// end of a context is left out). ended reports that ctx ended or the
// consumer was closed: the caller stops polling.
func (c *Consumer) Poll(ctx context.Context) (records []Record, failures []Failure, ended bool) {
	fetches := c.client.PollFetches(ctx)
	if fetches.IsClientClosed() || ctx.Err() != nil {
		return nil, nil, true
	}
	for _, failure := range fetches.Errors() {
		if contextEnded(failure.Err) {
			continue
		}
		failures = append(failures, Failure{Partition: Partition{Topic: failure.Topic, Partition: failure.Partition}, Err: failure.Err})
	}
	for record := range fetches.RecordsAll() {
		r := Record{
			Partition: Partition{Topic: record.Topic, Partition: record.Partition},
			Offset:    record.Offset,
			Key:       record.Key,
			Value:     record.Value,
			Timestamp: record.Timestamp.UnixMilli(),
			Producer:  Producer{ID: record.ProducerID, Epoch: record.ProducerEpoch},
		}
		if len(record.Headers) > 0 {
			r.Headers = make([]Header, len(record.Headers))
			for i, h := range record.Headers {
				r.Headers[i] = Header{Key: h.Key, Value: h.Value}
			}
		}
		records = append(records, r)
	}
	return records, failures, false
}

// Closed is closed once Close was called.
func (c *Consumer) Closed() <-chan struct{} { return c.client.Context().Done() }

// Close ends the consumer; a Poll in flight returns with ended set.
func (c *Consumer) Close() { c.client.Close() }

// TopicCheckTimeout bounds [Consumer.CheckTopics]: a cluster that has not
// answered the Metadata request within it is reported as unreachable.
const TopicCheckTimeout = 10 * time.Second

// CheckTopics asks the cluster, in one Metadata request, whether the
// consumer's topics exist and may be described. A franz-go consumer waits
// without a word for a topic that does not exist and for a cluster that
// does not answer; this check is what lets a reader say so. It returns nil
// when every topic exists, and otherwise an *Error of op "read": Class
// Missing (UNKNOWN_TOPIC_OR_PARTITION) or NotAuthorized
// (TOPIC_AUTHORIZATION_FAILED) naming the first such topic, Closed on a
// closed consumer, Canceled when ctx ended, and Retriable when no broker
// answered: a dial that failed, or no answer within TopicCheckTimeout
// (the error wraps the dial error or the deadline).
func (c *Consumer) CheckTopics(ctx context.Context) error {
	ask, cancel := context.WithTimeout(ctx, TopicCheckTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range c.topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ask, c.client)
	switch {
	case errors.Is(err, kgo.ErrClientClosed):
		return errClosed
	case err != nil && ctx.Err() != nil:
		return &Error{Op: "read", Class: Canceled, Err: ctx.Err()}
	case err != nil:
		return &Error{Op: "read", Class: Retriable, Detail: errors.New("no broker answered a Metadata request of the topics"), Err: err}
	}
	for _, t := range resp.Topics {
		if err := codeError(t.ErrorCode); err != nil {
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			e := wrap(PathAdmin, "read: topic "+strconv.Quote(name), err)
			if e.Class == Missing {
				e.Detail = errors.New("it does not exist")
			}
			return e
		}
	}
	return nil
}
