package coordination

// The watch before a campaign's registration, with the duplicate-member
// watch on (WithDuplicateMemberCheck): the loop that carries out
// decideBeforeRegister, so that a second live process under one member id
// is refused before this call writes anything.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"time"
)

// watchBeforeRegister reads the role's partition and waits, as
// decideBeforeRegister says, until the call may register; it returns the
// error that ends the call ([ErrDuplicateMember], the context's, a refused
// read), and nil at once without the duplicate-member watch. The reads go
// through the campaign's fold, which the loop goes on with.
func (c *campaign) watchBeforeRegister(ctx context.Context) error {
	if !c.rules.duplicateCheck {
		return nil
	}
	clock := c.settings.clock
	var watch duplicateWatch
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		state, err := c.read(ctx)
		if errors.Is(err, errTopicRecreated) {
			continue
		}
		if err != nil {
			if err := c.fail(ctx, stageRead, err); err != nil {
				return err
			}
			continue
		}
		now := clock.NowMillis()
		c.wallShift = now - monoMillis(clock)
		started := watch.started
		step := decideBeforeRegister(state, c.member, c.view(state, epochAnswer{}), watch, c.rules, now)
		c.memory, watch = step.memory, step.watch
		if watch.started && !started {
			c.noteDuplicateWatch(watch, now)
		}
		switch {
		case step.err != nil:
			return step.err
		case step.register:
			return nil
		}
		c.wait(ctx, step.until)
	}
}

// noteDuplicateWatch logs the start of the watch before the registration:
// the call waits, which the caller should be able to tell from a hang.
func (c *campaign) noteDuplicateWatch(watch duplicateWatch, now int64) {
	wait := time.Duration(watch.until-now) * time.Millisecond
	if watch.lease != nil {
		c.logger.Warn("coordination: a live lease names this member: waiting up to "+wait.String()+" for a renewal before registering, to tell another live process under this member id from an earlier incarnation",
			slog.String("token", watch.lease.Token.String()), slog.Int64("granted_at", watch.lease.GrantedAt))
		return
	}
	c.logger.Warn("coordination: this member is registered as a standby: waiting up to "+wait.String()+" for its next heartbeat before registering, to tell another live process under this member id from a crashed earlier run",
		slog.Int64("last_seen", watch.entry.LastSeen), slog.Int64("offset", watch.entry.Offset))
}

// heartbeatOffset is what a campaign's fold keeps of the member's own
// heartbeat key beyond [RoleState]: the offset of its newest record, so
// that the watch before the registration can tell a heartbeat written
// after it began from one that an open transaction hid (writtenSince).
type heartbeatOffset struct {
	key    []byte // the encoded heartbeat key of the member, set at the first record
	offset int64
	known  bool
}

// apply folds one record of the role's partition.
func (h *heartbeatOffset) apply(role Role, member MemberID, record StateRecord) {
	if h.key == nil {
		h.key = EncodeKey(HeartbeatKey(role, member))
	}
	if bytes.Equal(record.Key, h.key) && (!h.known || record.Offset > h.offset) {
		h.offset, h.known = record.Offset, true
	}
}

// offsetOf returns the offset of the newest lease record when it is
// lease, and reports whether it is (the duplicate-member watch:
// writtenSince).
func (h *leaseHistory) offsetOf(lease Lease) (int64, bool) {
	if h.newest == nil || *h.newest != lease {
		return 0, false
	}
	return h.newestOffset, true
}
