package demo

// The crash of demo: a transport that a member's writes stop leaving,
// as in a long pause of the process or a network partition, until it
// wakes.

import (
	"context"
	"errors"
	"sync"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// gatedTransport is the transport of a demo member. While the member is
// frozen, its writes fail at once and never leave the process, as in a long
// pause of the process or a network partition: the leader stops renewing,
// and it does not resign. When it wakes, its first guarded write goes out
// before any lease write, so the broker, and not a local check, is what
// refuses the deposed leader.
type gatedTransport struct {
	*coordination.KafkaTransport

	mu      sync.Mutex
	state   gateState
	awake   chan struct{} // closed on wake
	waiting bool          // woken, the first guarded write not done yet
}

type gateState int

const (
	gateOpen gateState = iota
	gateFrozen
)

var errFrozen = errors.New("demo: the member is frozen, and its writes do not leave the process")

func (t *gatedTransport) freeze() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.state, t.awake = gateFrozen, make(chan struct{})
}

func (t *gatedTransport) wake() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state == gateFrozen {
		t.state, t.waiting = gateOpen, true
		close(t.awake)
	}
}

// waitAwake blocks while the member is frozen. It returns false when ctx
// ends first.
func (t *gatedTransport) waitAwake(ctx context.Context) bool {
	t.mu.Lock()
	state, awake := t.state, t.awake
	t.mu.Unlock()
	if state != gateFrozen {
		return true
	}
	select {
	case <-awake:
		return true
	case <-ctx.Done():
		return false
	}
}

// leaseBlocked reports whether a lease write must not go out now.
func (t *gatedTransport) leaseBlocked() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state == gateFrozen || t.waiting
}

func (t *gatedTransport) WriteLease(ctx context.Context, partition coordination.TopicPartition, token coordination.FencingToken, key, value []byte) error {
	if t.leaseBlocked() {
		return errFrozen
	}
	return t.KafkaTransport.WriteLease(ctx, partition, token, key, value)
}

func (t *gatedTransport) Append(ctx context.Context, partition coordination.TopicPartition, key, value []byte) error {
	t.mu.Lock()
	frozen := t.state == gateFrozen
	t.mu.Unlock()
	if frozen {
		return errFrozen
	}
	return t.KafkaTransport.Append(ctx, partition, key, value)
}

func (t *gatedTransport) WriteGuarded(ctx context.Context, token coordination.FencingToken, records []coordination.GuardedRecord) error {
	t.mu.Lock()
	frozen := t.state == gateFrozen
	t.mu.Unlock()
	if frozen {
		return errFrozen
	}
	err := t.KafkaTransport.WriteGuarded(ctx, token, records)
	t.mu.Lock()
	t.waiting = false
	t.mu.Unlock()
	return err
}
