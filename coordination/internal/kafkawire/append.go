package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// This file holds the plain writes of a Wire: one record with the
// idempotent producer, outside any transaction (the registrations).

// AbandonGrace bounds how long a write waits for its request after the
// caller's context ended: a commit or an acknowledgement in flight often
// comes within it. Every write of the wire returns within its context plus
// this bound.
const AbandonGrace = 250 * time.Millisecond

// Append appends one record to its partition with the plain idempotent
// producer (acks=all), outside any transaction, and returns when the
// leader and its in-sync replicas have it. It retries what franz-go
// retries (a lost connection, a leader that moved, NOT_ENOUGH_REPLICAS)
// until ctx ends, and returns at most AbandonGrace after that, with an
// error that says whether the record may still be appended. Its errors are
// *Error of PathAppend, named "append to <partition>"; a call on a closed
// wire returns one of class Closed. It is safe for concurrent use.
func (w *Wire) Append(ctx context.Context, record Record) error {
	if w.Closed() {
		return errClosed
	}
	r := &kgo.Record{Topic: record.Partition.Topic, Partition: record.Partition.Partition, Key: record.Key, Value: record.Value}
	if err := w.produceBounded(ctx, r); err != nil {
		if errors.Is(err, kerr.UnknownTopicID) {
			// The topic was deleted and created again: franz-go keeps
			// the old id, and fails every record of the topic, until
			// the client forgets it. The call fails, and the next one
			// produces under the new id.
			w.plain.PurgeTopicsFromProducing(record.Partition.Topic)
		}
		return wrap(PathAppend, "append to "+record.Partition.String(), err)
	}
	return nil
}

// produceBounded produces one record with the plain producer and waits for
// its acknowledgement, for the end of ctx, or for AbandonGrace after it,
// whichever comes first. franz-go fails a record whose context ends before
// it was sent, but an idempotent producer cannot take back a record in
// flight, so a call that must return within its context stops waiting for
// it: the error then says that the outcome is unknown. The record's
// callback runs later on franz-go's goroutine, into a buffered channel.
func (w *Wire) produceBounded(ctx context.Context, record *kgo.Record) error {
	done := make(chan error, 1)
	w.plain.Produce(ctx, record, func(_ *kgo.Record, err error) { done <- err })
	if answered, err := awaitWithGrace(ctx, done); answered {
		return err
	}
	return fmt.Errorf("the call's context ended (%w) with the record in flight; its outcome is unknown, and it may still be appended", ctx.Err())
}

// awaitWithGrace waits for the answer of a request in flight on done, for
// the end of ctx, and then for AbandonGrace more. It reports true and the
// answer, or false when the grace ran out with the request still in
// flight (its outcome is unknown to the caller then).
func awaitWithGrace(ctx context.Context, done <-chan error) (answered bool, err error) {
	select {
	case err := <-done:
		return true, err
	case <-ctx.Done():
	}
	grace := time.NewTimer(AbandonGrace)
	defer grace.Stop()
	select {
	case err := <-done:
		return true, err
	case <-grace.C:
		return false, nil
	}
}
