package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// tombstoneTransport is the in-memory transport with a ExtendedTransport.WriteTombstones: it
// records each WriteTombstones call, and either fails it with err or
// writes each tombstone under the token with WriteLease (the in-memory
// cluster has no multi-record transaction; what is checked here is what
// Resign asks of the transport).
type tombstoneTransport struct {
	*coordinationtest.Transport
	err error

	mu    sync.Mutex
	calls [][]string // the keys of each call
}

func (t *tombstoneTransport) WriteTombstones(ctx context.Context, partition coordination.TopicPartition, token coordination.FencingToken, keys ...[]byte) error {
	t.mu.Lock()
	call := make([]string, len(keys))
	for i, key := range keys {
		call[i] = string(key)
	}
	t.calls = append(t.calls, call)
	t.mu.Unlock()
	if t.err != nil {
		return fmt.Errorf("test: tombstones under %s: %w", token, t.err)
	}
	for _, key := range keys {
		if err := t.Transport.WriteLease(ctx, partition, token, key, nil); err != nil {
			return err
		}
	}
	return nil
}

// TestResignWritesItsTombstonesInOneCall: over a ExtendedTransport.WriteTombstones, Resign
// asks for the lease tombstone and the registration tombstone in one call
// (one transaction over Kafka), lease first, and appends nothing; when
// that call fails, fenced or not, the registration tombstone goes again as
// a plain append, so the member still leaves the roster, and Resign
// reports the failure.
func TestResignWritesItsTombstonesInOneCall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		wantErr error // nil: Resign succeeds
		fenced  bool  // the leadership ends fenced instead of resigned
	}{
		{name: "committed"},
		{name: "fenced", err: coordination.ErrFenced, wantErr: coordination.ErrFenced, fenced: true},
		{name: "failed", err: errors.New("test: the coordinator did not answer"), wantErr: errors.New("")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := scNewEnv(t, false)
				defer e.teardown()
				node1 := e.member("node-1")
				writer := &tombstoneTransport{Transport: node1.raw, err: tc.err}
				node1.transport = writer
				l := e.acquireNow(node1)
				appends, leases := node1.raw.Calls(coordinationtest.OpAppend), node1.raw.Calls(coordinationtest.OpWriteLease)

				err := l.Resign(context.Background())
				switch {
				case tc.wantErr == nil && err != nil:
					t.Fatalf("Resign = %v, want nil", err)
				case tc.wantErr != nil && err == nil:
					t.Fatalf("Resign = nil, want the failure of the tombstones")
				case tc.fenced && !errors.Is(err, coordination.ErrFenced):
					t.Fatalf("Resign = %v, want an error that wraps ErrFenced", err)
				}
				want := coordination.ErrNotHeld
				if tc.fenced {
					want = coordination.ErrFenced
				}
				scEnded(t, l, want)

				leaseKey := string(coordination.EncodeKey(coordination.LeaseKey(e.role)))
				registrationKey := string(coordination.EncodeKey(coordination.RegistrationKey(e.role, node1.id)))
				if len(writer.calls) != 1 || len(writer.calls[0]) != 2 || writer.calls[0][0] != leaseKey || writer.calls[0][1] != registrationKey {
					t.Fatalf("WriteTombstones calls = %q; want one call with the lease key, then the registration key", writer.calls)
				}
				if got := node1.raw.Calls(coordinationtest.OpWriteLease) - leases; tc.err == nil && got != 2 || tc.err != nil && got != 0 {
					t.Fatalf("%d lease writes besides WriteTombstones' own; want none", got)
				}
				wantAppends := 0
				if tc.err != nil {
					wantAppends = 1 // the registration tombstone, again, outside the failed transaction
				}
				if got := node1.raw.Calls(coordinationtest.OpAppend) - appends; got != wantAppends {
					t.Fatalf("%d appends by Resign; want %d", got, wantAppends)
				}
				if state := e.state(); len(state.Roster) != 0 {
					t.Fatalf("roster after Resign: %s; want node-1 deregistered", e.roster())
				}
			})
		})
	}
}
