package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// ruUnanswered is the transport of a member whose writes under its token
// get no answer once stuck is set: each waits for its context and returns
// what KafkaTransport returns for a transaction abandoned in flight, an
// error that wraps ErrOutcomeUnknown and the context's error, and nothing
// else (the epoch goes on, as far as the call knows). Plain appends (the
// registration tombstone) still go through.
type ruUnanswered struct {
	*coordinationtest.Transport
	stuck atomic.Bool
}

func (s *ruUnanswered) unanswered(ctx context.Context, what string, token coordination.FencingToken) error {
	<-ctx.Done()
	return fmt.Errorf("%s under %s: the call's context ended (%w) with the transaction in flight: %w", what, token, ctx.Err(), coordination.ErrOutcomeUnknown)
}

func (s *ruUnanswered) WriteLease(ctx context.Context, tp coordination.TopicPartition, token coordination.FencingToken, key, value []byte) error {
	if s.stuck.Load() {
		return s.unanswered(ctx, "lease write", token)
	}
	return s.Transport.WriteLease(ctx, tp, token, key, value)
}

func (s *ruUnanswered) WriteTombstones(ctx context.Context, tp coordination.TopicPartition, token coordination.FencingToken, keys ...[]byte) error {
	if s.stuck.Load() {
		return s.unanswered(ctx, "tombstones", token)
	}
	return s.Transport.WriteTombstones(ctx, tp, token, keys...)
}

func ruMember(t *testing.T, e *scEnv) (*scMember, *ruUnanswered) {
	raw := e.cluster.Transport("node-1")
	stuck := &ruUnanswered{Transport: raw}
	return &scMember{id: fxMember(t, "node-1"), raw: raw, transport: stuck}, stuck
}

// TestResignWithoutDeadlineIsBoundedByTheLease: Resign with
// context.Background() at 15 s, while the renewal due at 10 s and the
// tombstones get no answer. Resign stops the renewal, and waits for its
// tombstones until the deadline of the newest lease (30 s); the
// registration tombstone then goes as a plain append. Before, the tombstones
// waited for as long as the broker stayed silent.
func TestResignWithoutDeadlineIsBoundedByTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := scNewEnv(t, false)
		defer e.teardown()
		node1, stuck := ruMember(t, e)
		holder := e.acquireNow(node1)
		stuck.stuck.Store(true)
		e.runTo(15_000)
		scHolds(t, holder)
		done := make(chan error, 1)
		go func() { done <- holder.Resign(context.Background()) }()
		e.runTo(29_999)
		select {
		case err := <-done:
			t.Fatalf("Resign returned before the deadline of the lease: %v", err)
		default:
		}
		e.runTo(30_000)
		select {
		case err := <-done:
			if !errors.Is(err, coordination.ErrOutcomeUnknown) {
				t.Fatalf("Resign = %v, want the tombstones' error, which wraps ErrOutcomeUnknown", err)
			}
		default:
			t.Fatal("Resign(context.Background()) still waits at the deadline of the newest lease")
		}
		scEnded(t, holder, coordination.ErrNotHeld)
		if roster := e.roster(); roster != "" {
			t.Fatalf("the roster after the resignation is %q, want the member deregistered", roster)
		}
	})
}
