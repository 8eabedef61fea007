package demo

// The scenario of demo: its six steps (election, crash, failover at the
// deadline, fencing, no failback, handover) and the waits between them.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/krabka-io/krabka-streams-go/cmd/krabka-coord/internal/clifmt"
	"github.com/krabka-io/krabka-streams-go/coordination"
)

// scenario plays the six steps.
func (d *demo) scenario(ctx context.Context) error {
	// 1. Election: the members register in order; node-1 ranks first.
	for _, m := range d.members {
		m.campaign(ctx)
		if err := d.waitState(ctx, 10*time.Second, "the registration of "+m.name, func(s coordination.RoleState) bool {
			_, ok := s.Entry(m.id)
			return ok
		}); err != nil {
			return err
		}
	}
	leader, err := d.waitElected(ctx, 15*time.Second, "the first election")
	if err != nil {
		return err
	}
	if err := d.waitCommands(ctx, leader, 4); err != nil {
		return err
	}

	// 2. Crash: the leader's writes stop leaving the process; no resignation.
	d.mu.Lock()
	d.crashAt, d.crashed = time.Now(), leader
	d.mu.Unlock()
	leader.gate.freeze()
	lease := leader.currentLeadership().Lease()
	d.out.add(leader.name, "crash", lease.Token.String(), "leader", fmt.Sprintf(
		"crashes: stops renewing, its writes no longer leave the process; it does not resign (lease deadline %s)",
		clifmt.FormatAgo(lease.Deadline, time.Now().UnixMilli())))

	// 3. Failover at the deadline.
	successor, err := d.waitElected(ctx, 2*d.config.Duration()+4*d.config.ChallengeStagger()+15*time.Second, "the failover")
	if err != nil {
		return err
	}
	if err := d.waitCommands(ctx, successor, 3); err != nil {
		return err
	}

	// 4. The deposed leader wakes, and its next guarded write is refused.
	d.out.add(leader.name, "wake", lease.Token.String(), "deposed", "wakes up, still believes it leads, and dispatches its next command")
	leader.gate.wake()
	select {
	case m := <-d.fenced:
		if m != leader {
			return fmt.Errorf("%s was fenced, not %s", m.name, leader.name)
		}
	case <-ctx.Done():
		return fmt.Errorf("waiting for the refusal of %s's write: %w", leader.name, ctx.Err())
	case <-time.After(15 * time.Second):
		return fmt.Errorf("the write of the deposed %s was not refused within 15s", leader.name)
	}

	// 5. It rejoins, and ranks last.
	before, _ := d.currentState().Entry(leader.id)
	leader.campaign(ctx)
	if err := d.waitState(ctx, 10*time.Second, "the new registration of "+leader.name, func(s coordination.RoleState) bool {
		entry, ok := s.Entry(leader.id)
		return ok && entry.Offset > before.Offset
	}); err != nil {
		return err
	}
	state := d.currentState()
	rank, _ := state.RankOf(leader.id)
	standbys := len(state.Roster) - 1
	if rank == standbys-1 {
		d.check("no failback", true, fmt.Sprintf("%s rejoined at rank %d of %d standbys (last)", leader.name, rank, standbys))
	} else {
		d.check("no failback", false, fmt.Sprintf("%s rejoined at rank %d of %d standbys; want rank %d, the last", leader.name, rank, standbys, standbys-1))
	}
	if err := d.waitCommands(ctx, successor, 5); err != nil {
		return err
	}

	// 6. The new leader resigns; the next takes over at once.
	d.mu.Lock()
	d.resignAt, d.resigned = time.Now(), successor
	d.mu.Unlock()
	l := successor.currentLeadership()
	d.out.add(successor.name, "resign", l.Token().String(), "leader", "resigns: clears its lease and leaves the roster")
	successor.stopDispatch()
	resignCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = l.Resign(resignCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("%s resigns: %w", successor.name, err)
	}
	third, err := d.waitElected(ctx, 10*time.Second, "the handover")
	if err != nil {
		return err
	}
	handover := third.electedTime().Sub(d.resignAt)
	switch {
	case third == leader:
		d.check("handover at once", false, fmt.Sprintf("%s, the deposed leader that rejoined last, took over after %s resigned; want %s, the first standby", third.name, successor.name, "the member of rank 0"))
	case handover >= d.config.Duration():
		d.check("handover at once", false, fmt.Sprintf("%s took over %s after %s resigned; want well within the lease %v, without waiting for a deadline (a mint on a loaded host can be slow: rerun with a longer --lease-duration)",
			third.name, clifmt.FormatShort(handover), successor.name, d.config.Duration()))
	default:
		d.check("handover at once", true, fmt.Sprintf("%s took over %s after %s resigned, without waiting for a deadline (lease %v)", third.name, clifmt.FormatShort(handover), successor.name, d.config.Duration()))
	}
	return d.waitCommands(ctx, third, 3)
}

// stopMembers ends every campaign and every leadership: a waiting member
// leaves the roster, a leader resigns.
func (d *demo) stopMembers() {
	var wg sync.WaitGroup
	for _, m := range d.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.stop()
		}()
	}
	wg.Wait()
}

// waitElected waits for the next election, and then one renew interval
// more, so that an election that a later challenger fenced at once (two
// challengers on a loaded host) does not pass for the outcome: it returns
// the last member elected whose leadership still holds.
func (d *demo) waitElected(ctx context.Context, timeout time.Duration, what string) (*demoMember, error) {
	var elected *demoMember
	select {
	case elected = <-d.elected:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
	case <-time.After(timeout):
		return nil, fmt.Errorf("no member took the role within %v of waiting for %s", timeout, what)
	}
	settle := time.After(d.config.RenewInterval())
	for {
		select {
		case m := <-d.elected:
			d.out.add(m.name, "note", m.currentToken().String(), "leader", fmt.Sprintf("a second election during %s: %s took the role from %s", what, m.name, elected.name))
			elected = m
		case <-settle:
			if l := elected.currentLeadership(); l == nil || l.Err() != nil {
				return nil, fmt.Errorf("%s was elected during %s, and lost the role at once: %w", elected.name, what, l.Err())
			}
			return elected, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// waitCommands waits until m dispatched n commands in its current term.
func (d *demo) waitCommands(ctx context.Context, m *demoMember, n int) error {
	deadline := time.Now().Add(time.Duration(n)*d.opts.Interval + 15*time.Second)
	for m.termAcks() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s dispatched %d of %d commands in time", m.name, m.termAcks(), n)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the commands of %s: %w", m.name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// currentState is the latest role state that the observer folded.
func (d *demo) currentState() coordination.RoleState {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state
}

// waitState waits until the observer's state satisfies ok.
func (d *demo) waitState(ctx context.Context, timeout time.Duration, what string, ok func(coordination.RoleState) bool) error {
	deadline := time.After(timeout)
	for {
		d.mu.Lock()
		state, changed := d.state, d.stateChanged
		d.mu.Unlock()
		if ok(state) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-deadline:
			return fmt.Errorf("%s did not show in the state topic within %v", what, timeout)
		}
	}
}

// electedNote says how a member came to be elected.
func (d *demo) electedNote(m *demoMember, l *coordination.Leadership) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.resigned != nil && m != d.resigned && !d.resignAt.IsZero():
		return fmt.Sprintf("takes over %s after %s resigned (no deadline to wait for): mints a new epoch, writes its lease",
			clifmt.FormatShort(time.Since(d.resignAt)), d.resigned.name)
	case d.crashed != nil && m != d.crashed:
		return fmt.Sprintf("takes over at the deadline, %s after %s crashed: mints a new epoch, which fences %s",
			clifmt.FormatSeconds(time.Since(d.crashAt)), d.crashed.name, d.crashed.currentToken())
	}
	// The rank it had: its place among the registrations, as no lease
	// stood.
	rank := -1
	for i, entry := range d.state.Roster {
		if entry.Member == m.id {
			rank = i
		}
	}
	if rank <= 0 {
		return "elected: no lease yet, so rank 0 challenges at once: mints an epoch, writes the first lease"
	}
	return fmt.Sprintf("elected at rank %d: no lease yet, and no member of a lower rank took the role within %v of the challenge stagger (a slow mint on a loaded host): mints an epoch, writes the first lease",
		rank, d.config.ChallengeDelay(rank))
}
