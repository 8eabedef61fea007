package device

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/internal/bridge"
	"github.com/krabka-io/krabka-streams-go/coordination/internal/kafkawire"
	"github.com/krabka-io/krabka-streams-go/coordination/internal/topicname"
)

// This file holds KafkaCommandReader, the device side's reader of guarded
// topics: a thin layer over kafkawire's read_committed Consumer that turns
// each record into a Command with the token of its batch.

// KafkaCommandReader reads guarded topics, the caller's own topics that
// holders write with coordination's Leadership.Write, on the device side:
// it yields each record as a [Command] that carries the fencing token of
// its record batch (the producer id and producer epoch of the batch
// header), for a [Gate] to check. It is a franz-go consumer with
// read_committed isolation, which is not a check of authority (see the
// package doc).
//
// A KafkaCommandReader is one consumer: call [KafkaCommandReader.Commands]
// from one goroutine at a time. [KafkaCommandReader.Close] is safe to call
// from any goroutine, and more than once.
type KafkaCommandReader struct {
	consumer *kafkawire.Consumer

	// topicsFound is set once a Metadata request found every topic; only
	// the goroutine of Commands touches it.
	topicsFound bool
}

// NewKafkaCommandReader consumes the topics from brokers, a list of
// host:port seed addresses. Without a consumer option it reads every
// partition of the topics from the start; pass kgo.ConsumerGroup (and
// kgo.DisableAutoCommit to commit by hand) to resume where a group left
// off, kgo.ConsumeResetOffset to start elsewhere, and connection settings
// such as kgo.DialTLSConfig or kgo.SASL.
//
// The reader sets, after the options, the seed brokers, the topics and
// read_committed isolation, which the check of a token rests on. It opens
// no connection; the first poll does. It returns an error for an empty
// topic list or topic name, an empty broker list, and options that kgo
// rejects.
func NewKafkaCommandReader(topics []string, clientOptions []kgo.Opt, brokers ...string) (*KafkaCommandReader, error) {
	if len(topics) == 0 {
		return nil, errors.New("device: NewKafkaCommandReader: no topics")
	}
	for i, topic := range topics {
		if err := topicname.Check(topic); err != nil {
			return nil, fmt.Errorf("device: NewKafkaCommandReader: topic %d %q: %w", i, topic, err)
		}
	}
	if len(brokers) == 0 {
		return nil, errors.New("device: NewKafkaCommandReader: no brokers: pass at least one host:port")
	}
	consumer, err := kafkawire.NewConsumer(topics, clientOptions, brokers)
	if err != nil {
		return nil, fmt.Errorf("device: NewKafkaCommandReader: %w", err)
	}
	return &KafkaCommandReader{consumer: consumer}, nil
}

// Commands yields the records of the topics as they become readable, each
// partition in offset order, with a nil error; a fetch that fails yields
// (Command{}, the error) and the reader goes on, as franz-go retries
// fetches itself. The iteration ends when ctx ends or the reader is
// closed, or when the loop breaks; the next call goes on where this one
// stopped. A consumer group commits what was yielded (franz-go's
// autocommit), unless the options say otherwise.
//
// Until one Metadata request has found every topic, each round asks for
// them first, so that a reader never waits without a word: a topic that
// does not exist yields an error that names it (wrapping
// kerr.UnknownTopicOrPartition), one that the user may not describe an
// error that wraps [coordination.ErrNotAuthorized], and a Metadata request that no
// broker answers (a refused dial at once, silence within 10 s) an error
// that says so. The reader asks
// again after 1 s, then 2 s, and so on up to 30 s, so a topic created
// later is read from its start. Once the topics were found, franz-go's
// own retries take over.
func (r *KafkaCommandReader) Commands(ctx context.Context) iter.Seq2[Command, error] {
	return func(yield func(Command, error) bool) {
		backoff := time.Second
		for !r.topicsFound {
			err := r.consumer.CheckTopics(ctx)
			if err == nil {
				r.topicsFound = true
				break
			}
			if class := kafkawire.ClassOf(err); class == kafkawire.Closed || class == kafkawire.Canceled {
				return
			}
			if !yield(Command{}, bridge.KafkaError(err)) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-r.consumer.Closed():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
		}
		for {
			records, failures, ended := r.consumer.Poll(ctx)
			if ended {
				return
			}
			for _, failure := range failures {
				err := fmt.Errorf("device: read %s: %w", failure.Partition, failure.Err)
				if !yield(Command{}, err) {
					return
				}
			}
			for _, record := range records {
				if !yield(commandOf(record), nil) {
					return
				}
			}
		}
	}
}

// Close ends the reader's consumer; a Commands loop in flight ends.
func (r *KafkaCommandReader) Close() { r.consumer.Close() }

// commandOf reads one consumed record, with the token of its batch.
func commandOf(record kafkawire.Record) Command {
	command := Command{
		Topic:     record.Partition.Topic,
		Partition: int(record.Partition.Partition),
		Offset:    record.Offset,
		Key:       record.Key,
		Value:     record.Value,
		Timestamp: record.Timestamp,
		Token:     tokenOf(record.Producer),
	}
	if len(record.Headers) > 0 {
		command.Headers = make([]coordination.RecordHeader, len(record.Headers))
		for i, h := range record.Headers {
			command.Headers[i] = coordination.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	return command
}

// tokenOf is the token of a producer pair, and NoEpoch for a pair that no
// token carries (a negative id or epoch).
func tokenOf(producer kafkawire.Producer) coordination.FencingToken {
	token, err := coordination.NewFencingToken(producer.ID, producer.Epoch)
	if err != nil {
		return coordination.NoEpoch
	}
	return token
}
