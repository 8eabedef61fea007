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
// error that says whether the record may still be appended. A fatal answer
// to the producer's InitProducerId, which franz-go keeps for the client's
// life, replaces the producer (see "A producer id that franz-go keeps
// failed" below). Its errors are *Error of PathAppend, named "append to
// <partition>"; a call on a closed wire returns one of class Closed. It is
// safe for concurrent use.
func (w *Wire) Append(ctx context.Context, record Record) error {
	op := "append to " + record.Partition.String()
	for rebuilds := 0; ; rebuilds++ {
		a := w.acquireAppender()
		if a == nil {
			return errClosed
		}
		r := &kgo.Record{Topic: record.Partition.Topic, Partition: record.Partition.Partition, Key: record.Key, Value: record.Value}
		err := w.produceBounded(ctx, a, r)
		if err == nil {
			return nil
		}
		if errors.Is(err, kerr.UnknownTopicID) {
			// The topic was deleted and created again: franz-go keeps
			// the old id, and fails every record of the topic, until
			// the client forgets it. The call fails, and the next one
			// produces under the new id.
			a.client.PurgeTopicsFromProducing(record.Partition.Topic)
		}
		kept, unsent := keptProducerIDError(ctx, a.client, err)
		if !kept {
			return wrap(PathAppend, op, err)
		}
		if rerr := w.rebuildAppender(a); rerr != nil {
			return &Error{Op: op, Class: ClassOf(rerr), Detail: fmt.Errorf("%w; a new producer could not be built: %w", err, rerr)}
		}
		if class := Classify(PathAppend, err); !unsent || rebuilds+1 >= MaxAppendRebuilds || ctx.Err() != nil ||
			class == Misconfigured || class == NotAuthorized {
			return &Error{Op: op, Class: class, Detail: fmt.Errorf("the plain producer's InitProducerId was refused (%w); "+
				"the wire replaced the producer, and the next append asks for a new producer id", err)}
		}
		// No record went out under the failed client (it never had a
		// producer id): the new one sends this record once.
	}
}

// MaxAppendRebuilds bounds the producers that one [Wire.Append] builds
// after fatal answers to their InitProducerId before it returns the last
// answer.
const MaxAppendRebuilds = 3

// A producer id that franz-go keeps failed
//
// franz-go keeps a fatal answer to the idempotent producer's
// InitProducerId (doInitProducerID returns keep=true: PRODUCER_FENCED,
// INVALID_TRANSACTION_TIMEOUT, UNKNOWN_SERVER_ERROR, any code that is not
// retriable) for the client's life, and fails every later record with it;
// it has no call that resets the idempotent producer's id (its recoveries,
// maybeRecoverProducerID, are for transactional clients). So when a record
// fails with such a code and the client's ProducerID returns that code as
// it is (not a failed load, which franz-go retries itself), the wire
// builds a new producer with plain's options for the appends. The failed
// one takes no new record; it is closed once its records in flight have
// their answers (or at Close), unless it is plain, which keeps serving the
// admin requests. One rebuild runs at a time, and only the first of the
// calls that saw the same producer fail builds its successor.
//
// A record is sent again on the new producer only when the failed one
// never had a producer id (id -1: nothing was sent under it), at most
// MaxAppendRebuilds times per call; otherwise, and for
// INVALID_TRANSACTION_TIMEOUT (Misconfigured) and
// CLUSTER_AUTHORIZATION_FAILED (NotAuthorized), the call returns the code,
// and the next call uses the new producer.

// appender is a producer of the appends: plain, or one that replaced it.
// w.mu guards inflight and retired.
type appender struct {
	client   *kgo.Client
	inflight int           // records produced whose callback has not run
	retired  bool          // replaced: takes no new record
	drained  chan struct{} // closed when retired with nothing in flight
}

func newAppender(client *kgo.Client) *appender {
	return &appender{client: client, drained: make(chan struct{})}
}

// producer returns the client of the appends now.
func (w *Wire) producer() *kgo.Client {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.appender.client
}

// acquireAppender returns the appender of the wire with one more record in
// flight, which releaseAppender takes back, or nil when the wire is closed.
func (w *Wire) acquireAppender() *appender {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.appender.inflight++
	return w.appender
}

// releaseAppender ends one record in flight of a.
func (w *Wire) releaseAppender(a *appender) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a.inflight--
	if a.inflight == 0 && a.retired {
		close(a.drained)
	}
}

// rebuildAppender replaces failed, the appender whose producer id franz-go
// keeps failed, with a new producer of plain's options, unless another
// call replaced it already. The failed appender's client is closed on a
// goroutine of the wire when its last record in flight has its answer or
// at Close (plain itself is never closed here). It returns an *Error of
// class Closed on a closed wire, and the error of kgo.NewClient.
func (w *Wire) rebuildAppender(failed *appender) error {
	w.rebuilds.Lock()
	defer w.rebuilds.Unlock()
	w.mu.Lock()
	current := w.appender
	w.mu.Unlock()
	if current != failed {
		return nil // another call rebuilt it
	}
	fresh, err := kgo.NewClient(w.plainOptions...)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		fresh.Close()
		return errClosed
	}
	w.appender = newAppender(fresh)
	failed.retired = true
	if failed.inflight == 0 {
		close(failed.drained)
	}
	if failed.client != w.plain {
		w.closers.Go(func() { // ends when the failed producer's records have their answers, or at Close
			select {
			case <-failed.drained:
			case <-w.ctx.Done():
			}
			failed.client.Close()
		})
	}
	return nil
}

// keptProducerIDError reports whether err, the error of a record of
// client, is a fatal answer to the client's InitProducerId that franz-go
// keeps (kept), and whether the client never had a producer id, so that
// no record went out under it (unsent).
func keptProducerIDError(ctx context.Context, client *kgo.Client, err error) (kept, unsent bool) {
	var ke *kerr.Error
	if !errors.As(err, &ke) || ke.Retriable {
		return false, false
	}
	id, _, idErr := client.ProducerID(ctx)
	stored, ok := idErr.(*kerr.Error) //nolint:errorlint // franz-go stores a kept answer as it is, and wraps a failed load
	if !ok || !errors.Is(err, stored) {
		return false, false
	}
	return true, id < 0
}

// produceBounded produces one record with the appender a and waits for
// its acknowledgement, for the end of ctx, or for AbandonGrace after it,
// whichever comes first. franz-go fails a record whose context ends before
// it was sent, but an idempotent producer cannot take back a record in
// flight, so a call that must return within its context stops waiting for
// it: the error then says that the outcome is unknown. The record's
// callback runs later on franz-go's goroutine, into a buffered channel,
// and releases the record from a.
func (w *Wire) produceBounded(ctx context.Context, a *appender, record *kgo.Record) error {
	done := make(chan error, 1)
	a.client.Produce(ctx, record, func(_ *kgo.Record, err error) {
		w.releaseAppender(a)
		done <- err
	})
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
