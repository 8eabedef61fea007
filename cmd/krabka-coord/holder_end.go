package main

// The end of a leadership of elect and run: a resignation (on a signal,
// or the tombstones that run writes after its renew deadline), a fence or
// a lost producer, and the campaign again with --rejoin.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// resignTimeout bounds a resignation: two tombstones that take
// milliseconds on a healthy cluster. A cluster that does not answer within
// it leaves the lease to expire, and the standbys take over at its
// deadline.
const resignTimeout = 2 * time.Second

// resign gives the role up after a signal, within resignTimeout; a second
// signal (again) stops waiting for the cluster. With --successor or
// --successor-policy it first hands the role to the successor, within the
// transfer's bound, and resigns when that fails.
func (h *holder) resign(leadership *coordination.Leadership, again <-chan os.Signal) error {
	if h.transferOnShutdown(leadership, again) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
	defer cancel()
	resigned := make(chan error, 1)
	go func() { resigned <- h.resignLeadership(ctx, leadership) }()
	var err error
	select {
	case err = <-resigned:
	case <-again:
		cancel()
		<-resigned // Resign returns within 250 ms of its context
		h.metrics.ended("resigned")
		h.report(holderEvent{Event: "resigned", Token: newTokenJSON(leadership.Token()), Message: "second signal: exit without a confirmed resignation"},
			fmt.Sprintf("krabka-coord: second signal: member %s exits without waiting for its resignation of role %s; the standbys take over at the lease deadline at the latest", h.shownMember(), h.shownRole()), true)
		return nil
	}
	if cause := endedBefore(leadership, err); cause != nil {
		return h.lostTo(leadership, cause) // a fence or a lost producer came first
	}
	h.metrics.ended("resigned")
	if err != nil {
		h.report(holderEvent{Event: "resigned", Token: newTokenJSON(leadership.Token()), Message: "resignation not confirmed: " + oneLine(errText(err))},
			fmt.Sprintf("krabka-coord: warning: member %s stopped leading role %s, but the cluster did not confirm its resignation within %v (%s); the standbys take over at the lease deadline, %s",
				h.shownMember(), h.shownRole(), resignTimeout, oneLine(errText(err)), formatMillis(leadership.Lease().Deadline)), true)
		return nil
	}
	h.report(holderEvent{Event: "resigned", Token: newTokenJSON(leadership.Token())},
		fmt.Sprintf("resigned: member %s gave up role %s (token %s); the first standby in the roster, if any, takes over at once if it is alive", h.shownMember(), h.shownRole(), leadership.Token()), false)
	return nil
}

// resignLeadership resigns the leadership, as [coordination.Leadership.Resign]
// does. A leadership that run's renew deadline ended
// ([coordination.ErrRenewDeadline]) writes nothing any more, but its token
// may still be the newest, and the lease still names the member: for it,
// run writes the tombstones that Resign would have written (the lease's
// under the token, the registration's and the heartbeat's), so that the
// first standby takes over at once rather than at the lease deadline, and
// the member leaves the roster, as it did when run's own timer stopped the
// command of a live leadership. The broker refuses the lease's tombstone
// when another member minted a newer epoch: the error then wraps
// [coordination.ErrFenced]. Resign first waits for the write in flight of
// the leadership, so the tombstones never race a renewal on the role's
// producer.
func (h *holder) resignLeadership(ctx context.Context, leadership *coordination.Leadership) error {
	err := leadership.Resign(ctx)
	if err == nil || !errors.Is(leadership.Err(), coordination.ErrRenewDeadline) {
		return err // resigned, or ended otherwise
	}
	if ctx.Err() != nil {
		return err
	}
	var registrationErr error
	var tombstones sync.WaitGroup
	tombstones.Go(func() {
		registrationErr = h.metered.Append(ctx, h.partition, coordination.EncodeKey(coordination.RegistrationKey(h.role, h.member)), nil)
	})
	tombstones.Go(func() {
		// Hygiene only, as in Resign: a heartbeat without a registration
		// counts for nothing. run cannot tell whether the campaign wrote
		// one, and a tombstone on a key never written changes no fold.
		_ = h.metered.Append(ctx, h.partition, coordination.EncodeKey(coordination.HeartbeatKey(h.role, h.member)), nil)
	})
	leaseErr := h.metered.WriteLease(ctx, h.partition, leadership.Token(), coordination.EncodeKey(coordination.LeaseKey(h.role)), nil)
	tombstones.Wait()
	if leaseErr != nil && errors.Is(leaseErr, coordination.ErrFenced) {
		return fmt.Errorf("coordination: resignation of role %s by %s under %s: %w", h.role, h.member, leadership.Token(), leaseErr)
	}
	if err := errors.Join(leaseErr, registrationErr); err != nil {
		return fmt.Errorf("coordination: resign role %s: %w", h.role, err)
	}
	return nil
}

// endedBefore is the cause that ended the leadership before the
// resignation that returned err, or nil when the resignation ended it:
// a resignation ([coordination.ErrNotHeld]), or the renew deadline of run
// whose tombstones resignLeadership wrote (the fence that one of them met
// is the cause).
func endedBefore(leadership *coordination.Leadership, err error) error {
	cause := leadership.Err()
	switch {
	case cause == nil, errors.Is(cause, coordination.ErrNotHeld):
		return nil
	case errors.Is(cause, coordination.ErrRenewDeadline):
		if errors.Is(err, coordination.ErrFenced) {
			return err
		}
		return nil
	}
	return cause
}

// rejoinAfter reports whether the member campaigns again after the end
// that lost returned: with --rejoin after a fence, a lost producer or the
// lease guard of run, and never after a refused permission.
func (h *holder) rejoinAfter(err error) bool {
	var exit *exitError
	if !h.flags.rejoin || !errors.As(err, &exit) || exit.code != exitFenced {
		return false
	}
	fmt.Fprintf(h.g.stderr, "krabka-coord: %s; --rejoin: it campaigns again\n", oneLine(exit.err.Error()))
	return true
}

// lost handles a leadership that ended without a resignation: it leaves
// the roster, and returns exit code 3 for a fence or a lost producer, and 4
// for a permission that the cluster refused.
func (h *holder) lost(leadership *coordination.Leadership) error {
	return h.lostTo(leadership, leadership.Err())
}

// lostTo is lost for the cause that ended the leadership: Err, or the
// fence that a tombstone of resignLeadership met.
func (h *holder) lostTo(leadership *coordination.Leadership, cause error) error {
	reason := endReason(cause)
	h.metrics.ended(reason)
	if h.flags.rejoin && (reason == "fenced" || reason == "lost") {
		h.metrics.rejoined(reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
	defer cancel()
	// A fenced member writes no lease, but it may still leave the roster:
	// a registration needs no epoch.
	left := "it left the roster"
	if err := h.transport.Append(ctx, h.partition, coordination.EncodeKey(coordination.RegistrationKey(h.role, h.member)), nil); err != nil {
		// The tombstone did not land (the broker is unreachable, say):
		// the registration stays until its heartbeats stop counting.
		left = fmt.Sprintf("its registration could not be removed (%s), so it stays in the roster until it lapses (three heartbeat intervals)",
			oneLine(errText(err)))
	}
	var current *tokenJSON
	if status, err := coordination.DescribeLeadership(ctx, h.transport, h.role); err == nil && status.Held {
		current = newTokenJSON(status.Token)
	}
	h.report(holderEvent{Event: reason, Token: newTokenJSON(leadership.Token()), CurrentToken: current, Message: shortCause(cause)}, "", false)
	switch {
	case errors.Is(cause, coordination.ErrNotAuthorized):
		need := memberDenial(cause, h.role, h.g.topic, true)
		return h.session.deniedError(fmt.Sprintf("member %s lost role %s", h.shownMember(), h.shownRole()), need, cause)
	case errors.Is(cause, coordination.ErrProducerLost):
		return fencedError("lost: member %s lost role %s under token %s: the producer of its epoch is lost (%s), so no write under the token can land; %s; run it again to compete (or run with --rejoin)",
			h.shownMember(), h.shownRole(), leadership.Token(), oneLine(errText(cause)), left)
	case !errors.Is(cause, coordination.ErrFenced):
		return failure("member %s lost role %s: %s", h.shownMember(), h.shownRole(), oneLine(fmt.Sprint(cause)))
	}
	newer := "another member minted a newer epoch"
	if current != nil && current.Token != leadership.Token().String() {
		newer = "the coordinator holds " + current.Token + " now"
	}
	return fencedError("fenced: member %s lost role %s under token %s: %s, and the broker refused this member's renewal; %s",
		h.shownMember(), h.shownRole(), leadership.Token(), newer, left)
}

// endCauses are the causes of the end of a leadership that elect and run
// tell apart, in the order in which they are checked: the reason of each,
// for the metrics and the JSON events, and its words.
var endCauses = []struct {
	err          error
	reason, text string
}{
	{coordination.ErrFenced, "fenced", "fenced: another member holds a newer epoch"},
	{coordination.ErrProducerLost, "lost", "the producer of its epoch is lost"},
	{coordination.ErrNotAuthorized, "denied", "the cluster refused a permission"},
}

// endReason names why a leadership ended, for the metrics and the JSON
// events: fenced, lost (the producer of the epoch), denied (a permission),
// or resigned.
func endReason(cause error) string {
	for _, c := range endCauses {
		if errors.Is(cause, c.err) {
			return c.reason
		}
	}
	return "resigned"
}

// shortCause names why a leadership ended.
func shortCause(err error) string {
	for _, c := range endCauses {
		if errors.Is(err, c.err) {
			return c.text
		}
	}
	if err == nil {
		return "ended"
	}
	return oneLine(err.Error())
}
