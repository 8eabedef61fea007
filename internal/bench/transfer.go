package bench

// The figures of a planned transfer (issue 31): Leadership.TransferTo to
// a live member next to its protocol floor (FloorHandover with an offer in
// place of the tombstone, floor.go), a transfer to a member that is down
// or not in the roster, and the drain of a member that holds many roles.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// LibraryTransfer is the transfer of the library, sample by sample: two
// members, each with its own transport, hand one role to each other; a
// sample runs from the start of the holder's Leadership.TransferTo to the
// return of the named member's AcquireLeadership. Its steps are those of
// FloorHandoverSteps (the holder's EndTxn is that of its offer), then the
// return of TransferTo.
type LibraryTransfer struct {
	LibraryHandover
}

// NewLibraryTransfer opens the two members on a fresh state topic, and lets
// the first one take the role.
func (k *Kafka) NewLibraryTransfer(ctx context.Context) (*LibraryTransfer, error) {
	lease, _ := coordination.NewLeaseConfig(10*time.Second, 3*time.Second, time.Second)
	_, options, err := k.StateTopic(ctx, "krabka-bench-transfer", lease)
	if err != nil {
		return nil, err
	}
	role, err := k.role(ctx, "bench-transfer")
	if err != nil {
		return nil, err
	}
	h := &LibraryTransfer{LibraryHandover{role: role, members: [2]coordination.MemberID{mustMember("a"), mustMember("b")}, options: options}}
	for i := range h.transports {
		if h.transports[i], err = k.Member(lease, h.trace.hook(i)); err != nil {
			h.Close()
			return nil, err
		}
	}
	if h.holder, err = coordination.AcquireLeadership(ctx, h.transports[0], h.role, h.members[0], options...); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// LibraryTransferSteps names the steps of a LibraryTransfer sample.
var LibraryTransferSteps = append(slices.Clone(FloorTransferSteps), "the holder's TransferTo returns")

// Sample takes one transfer: the other member campaigns, and once it waits
// as a standby (untimed), the holder hands it the role.
func (h *LibraryTransfer) Sample(ctx context.Context) (Sample, error) {
	s := 1 - h.h
	ch := campaign(ctx, h.transports[s], h.role, h.members[s], h.options)
	if err := waitStandby(ctx, h.transports[h.h], h.role, h.members[s], h.options, -1); err != nil {
		return Sample{}, fmt.Errorf("%w: %w", errSampleState, err)
	}
	h.trace.begin()
	start := time.Now()
	if err := h.holder.TransferTo(ctx, h.members[s]); err != nil {
		h.trace.end()
		return Sample{}, fmt.Errorf("%w: transfer: %w", errSampleState, err)
	}
	transferred := time.Since(start)
	r := <-ch
	events := h.trace.end()
	if r.err != nil {
		return Sample{}, fmt.Errorf("%w: standby: %w", errSampleState, r.err)
	}
	steps := append(handoverSteps(events, h.h, s, start), transferred)
	names := make([]string, 2)
	names[h.h], names[s] = "holder", "named member"
	h.holder, h.h = r.leadership, s
	return Sample{D: r.at.Sub(start), Steps: steps, Requests: requestCounts(events, start, r.at), Trace: timeline(events, start, names)}, nil
}

// FloorTransferSteps names the steps of a floor transfer sample
// (FloorHandover with an offer).
var FloorTransferSteps = []string{"holder's offer: EndTxn answered", "named member's Fetch returns", "named member's InitProducerId answered",
	"its lease: AddPartitionsToTxn answered", "its lease: Produce answered", "its lease: EndTxn answered"}

// NewFloorTransfer is the floor of a transfer: NewFloorHandover whose
// holder writes, in its transaction, a lease that names the other member
// (the offer) in place of the tombstone. The other member reads it, mints
// (InitProducerId) and writes its own lease in a transaction: the least
// protocol work of a transfer, as docs/performance.md defines it.
func (k *Kafka) NewFloorTransfer(ctx context.Context) (*FloorHandover, error) {
	h, err := k.NewFloorHandover(ctx)
	if h != nil {
		h.offer = true
	}
	return h, err
}

// TransferRefusal is the outcome of a transfer that cannot succeed: to a
// member that is registered but down, or to one not in the roster.
type TransferRefusal struct {
	Took      []time.Duration // TransferTo's return, per round
	Faults    []string        // the TransferError's fault, per round
	Kept      int             // rounds after which the holder still led
	EpochUsed int             // rounds after which the coordinator's epoch was not the holder's
	Bound     time.Duration   // the transfer's bound (WithTransferTimeout)
}

// KafkaTransferRefusals measures rounds of a transfer to a member that is
// registered but runs no campaign (down: a registration record written for
// it, with no process behind it; heartbeats off, so the holder cannot know,
// and waits for the bound) and to a member not in the roster (refused at
// once). After each, it checks that the holder still leads and that the
// coordinator's epoch is still the holder's (no epoch used).
func (k *Kafka) KafkaTransferRefusals(ctx context.Context, rounds int, bound time.Duration) (down, notMember TransferRefusal, err error) {
	lease, _ := coordination.NewLeaseConfig(10*time.Second, 3*time.Second, time.Second)
	_, options, err := k.StateTopic(ctx, "krabka-bench-transfer-refused", lease)
	if err != nil {
		return down, notMember, err
	}
	role, err := k.role(ctx, "bench-transfer-refused")
	if err != nil {
		return down, notMember, err
	}
	t, err := k.Member(lease)
	if err != nil {
		return down, notMember, err
	}
	defer t.Close()
	options = append(options, coordination.WithTransferTimeout(bound))
	holder, err := coordination.AcquireLeadership(ctx, t, role, mustMember("a"), options...)
	if err != nil {
		return down, notMember, err
	}
	defer resignAll([]*coordination.Leadership{holder})
	partition, _ := coordination.RoleTopicPartition(role, options...)
	ghost := mustMember("down")
	value := coordination.EncodeRegistration(coordination.Registration{Member: ghost, RegisteredAt: time.Now().UnixMilli()})
	if err := t.Append(ctx, partition, coordination.EncodeKey(coordination.RegistrationKey(role, ghost)), value); err != nil {
		return down, notMember, fmt.Errorf("register the down member: %w", err)
	}
	// The holder's own view of the roster must show the down member before
	// the first round, or the round is refused as a non-member's: the read
	// of the roster, then a poll interval of the leadership's follower.
	if err := waitStandby(ctx, t, role, ghost, options, -1); err != nil {
		return down, notMember, err
	}
	select {
	case <-ctx.Done():
		return down, notMember, ctx.Err()
	case <-time.After(coordination.DefaultPollInterval + 100*time.Millisecond):
	}
	down.Bound, notMember.Bound = bound, bound
	for range rounds {
		for _, c := range []struct {
			to  coordination.MemberID
			out *TransferRefusal
		}{{ghost, &down}, {mustMember("nobody"), &notMember}} {
			start := time.Now()
			err := holder.TransferTo(ctx, c.to)
			c.out.Took = append(c.out.Took, time.Since(start))
			var te *coordination.TransferError
			if !errors.As(err, &te) {
				return down, notMember, fmt.Errorf("transfer to %s: %w; want a TransferError", c.to, err)
			}
			c.out.Faults = append(c.out.Faults, te.Fault.String())
			if holder.Err() == nil {
				c.out.Kept++
			}
			status, err := coordination.DescribeLeadership(ctx, t, role)
			if err != nil {
				return down, notMember, err
			}
			if !status.Held || status.Token != holder.Token() {
				c.out.EpochUsed++
			}
		}
		if holder.Err() != nil {
			return down, notMember, fmt.Errorf("the holder lost the role: %w", holder.Err())
		}
	}
	return down, notMember, nil
}

// KafkaDrain measures the drain of a member that holds n roles: member a
// holds them all on one transport, member b campaigns for each on its own;
// the drain hands every role to b (TransferTo, up to RolesAtOnce at once)
// and ends when b holds them all. It returns the time to empty a, and the
// count of transfers that failed.
func (k *Kafka) KafkaDrain(ctx context.Context, n int) (time.Duration, int, error) {
	lease, _ := coordination.NewLeaseConfig(10*time.Second, 3*time.Second, time.Second)
	_, options, err := k.StateTopic(ctx, "krabka-bench-drain", lease)
	if err != nil {
		return 0, 0, err
	}
	ta, err := k.Member(lease)
	if err != nil {
		return 0, 0, err
	}
	defer ta.Close()
	tb, err := k.Member(lease)
	if err != nil {
		return 0, 0, err
	}
	defer tb.Close()
	a, b := mustMember("a"), mustMember("b")
	roles := make([]coordination.Role, n)
	held := make([]*coordination.Leadership, n)
	var mu sync.Mutex
	var firstErr error
	forEach := func(do func(i int) error) {
		slots := make(chan struct{}, RolesAtOnce)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				slots <- struct{}{}
				defer func() { <-slots }()
				if err := do(i); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	forEach(func(i int) error {
		roles[i] = mustRole(fmt.Sprintf("bench-drain-%d", i))
		l, err := coordination.AcquireLeadership(ctx, ta, roles[i], a, options...)
		held[i] = l
		return err
	})
	if firstErr != nil {
		return 0, 0, firstErr
	}
	campaignCtx, stop := context.WithCancel(ctx)
	defer stop()
	taken := make([]<-chan acquired, n)
	for i := range n {
		taken[i] = campaign(campaignCtx, tb, roles[i], b, options)
	}
	forEach(func(i int) error { return waitStandby(ctx, ta, roles[i], b, options, -1) })
	if firstErr != nil {
		return 0, 0, firstErr
	}
	var failed int
	start := time.Now()
	forEach(func(i int) error {
		if err := held[i].TransferTo(ctx, b); err != nil {
			mu.Lock()
			failed++
			mu.Unlock()
		}
		return nil
	})
	// The drain ends when b holds every role that was handed to it; a
	// transfer that failed leaves its role with a, and b's campaign for it
	// ends with the bound.
	took := time.Duration(0)
	bound := time.After(time.Minute)
	var taker []*coordination.Leadership
	for i := range n {
		select {
		case r := <-taken[i]:
			if r.err == nil {
				took = max(took, r.at.Sub(start))
				taker = append(taker, r.leadership)
			}
		case <-bound:
			stop()
			if r := <-taken[i]; r.err == nil {
				taker = append(taker, r.leadership)
			}
		}
	}
	for i := range n {
		if held[i].Err() == nil {
			taker = append(taker, held[i])
		}
	}
	resignAll(taker)
	return took, failed, nil
}

// resignAll resigns the leaderships at once, each within a few seconds: a
// clean-up, whose failures leave the leases to lapse.
func resignAll(leaderships []*coordination.Leadership) {
	var wg sync.WaitGroup
	for _, l := range leaderships {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = l.Resign(ctx)
		})
	}
	wg.Wait()
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
