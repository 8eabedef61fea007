package demo

// The observer of demo: it follows the state partition of the role, as
// watch does, and puts what the log says on the timeline.

import (
	"context"
	"fmt"

	"github.com/krabka-io/krabka-streams-go/cmd/krabka-coord/internal/clifmt"
	"github.com/krabka-io/krabka-streams-go/coordination"
)

// observe follows the state partition with coordination.Observe, as
// watch does, and puts the registrations and expiries on the timeline. It
// closes synced once the first read of the partition is folded, so that
// the scenario starts only then: a registration the first read finds
// would be in the state only, not on the timeline. Read errors are
// retried by Observe; the demo's own checks report what they cost.
func (d *demo) observe(ctx context.Context, synced chan<- struct{}) {
	for change, err := range coordination.Observe(ctx, d.observer, []coordination.Role{d.role}, d.options...) {
		if err != nil {
			continue
		}
		if change.Kind == coordination.ChangeSynced {
			close(synced)
			continue
		}
		d.mu.Lock()
		d.state = change.State
		close(d.stateChanged)
		d.stateChanged = make(chan struct{})
		d.mu.Unlock()
		if event, ok := clifmt.EventOf(change, d.config); ok {
			d.onRoleEvent(event)
		}
	}
}

// onRoleEvent puts an event of the state topic on the timeline.
func (d *demo) onRoleEvent(event clifmt.RoleEvent) {
	switch event.Kind {
	case clifmt.EventRegistered:
		rank := fmt.Sprint(*event.Rank)
		d.mu.Lock()
		again := d.registered[event.Member]
		d.registered[event.Member] = true
		d.mu.Unlock()
		if again {
			d.out.add(event.Member, "rejoin", "-", rank, fmt.Sprintf("rejoins: registers again, at offset %d, so it ranks last: %s", *event.Offset, clifmt.RosterLine(event.Fold)))
		} else {
			d.out.add(event.Member, "register", "-", rank, fmt.Sprintf("registers: its record lands at offset %d of %s, which ranks it %d", *event.Offset, d.part, *event.Rank))
		}
	case clifmt.EventDeregistered:
		d.out.add(event.Member, "leave", "-", "-", "leaves the roster (registration tombstone)")
	case clifmt.EventExpired:
		d.out.add(event.Member, "expire", clifmt.TokenText(event.Token), "-", fmt.Sprintf("its lease expires: no renewal reached the log before the deadline %s", event.Deadline.Time))
	case clifmt.EventGranted, clifmt.EventTakeover, clifmt.EventReacquired:
		d.mu.Lock()
		d.takeovers = append(d.takeovers, event)
		d.mu.Unlock()
		if d.opts.Verbose {
			d.out.add(event.Member, event.Kind, clifmt.TokenText(event.Token), "leader", event.Message)
		}
		d.out.add("-", "roster", "-", "-", "the log now says: "+clifmt.RosterLine(event.Fold))
	case clifmt.EventRenewed, clifmt.EventReleased, clifmt.EventRestored:
		if d.opts.Verbose {
			d.out.add(event.Member, event.Kind, clifmt.TokenText(event.Token), "-", event.Message)
		}
	}
}
