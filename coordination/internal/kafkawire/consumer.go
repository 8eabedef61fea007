package kafkawire

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
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
	return &Consumer{client: client}, nil
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

// Close ends the consumer; a Poll in flight returns with ended set.
func (c *Consumer) Close() { c.client.Close() }
