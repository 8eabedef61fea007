package main

// A second live process under one member id, which elect and run refuse
// before they write anything: a live lease of the member that is being
// renewed, or a standby registration of it that gets heartbeats.

import (
	"context"
	"fmt"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// refuseLiveHolder refuses, before anything is written, a member whose
// name another live process uses: a live lease that names the member and
// keeps being renewed, or a standby registration of the member that is not
// lapsed and keeps getting heartbeats. Registering would replace that
// process's registration (which ends that process's campaign), and leaving
// again would take it out of the roster. A lease that is not renewed
// within half its extent, or a standby that writes no heartbeat within one
// heartbeat interval and one poll interval, is a crashed earlier
// incarnation, which the campaign takes over as usual.
func (h *holder) refuseLiveHolder(ctx context.Context, records []coordination.StateRecord) error {
	builder := coordination.NewRoleStateBuilder(h.role)
	for _, record := range records {
		_ = builder.Apply(record)
	}
	state := builder.Build()
	now := time.Now().UnixMilli()
	lease := state.Lease
	entry, registered := state.Entry(h.member)
	var watch time.Duration
	switch {
	case lease != nil && lease.Member == h.member:
		if now >= lease.Deadline {
			return nil
		}
		// A live holder renews at least every renew interval, and a poll
		// later this process sees it: the library's duplicate watch waits
		// as long (WithDuplicateMemberCheck).
		watch = min(h.config.RenewInterval()+h.flags.lease.poll+time.Second, time.Until(time.UnixMilli(lease.Deadline)))
		h.report(holderEvent{Event: "checking_duplicate"}, fmt.Sprintf("krabka-coord: the live lease of role %s names member %s: waiting up to %v for a renewal, to tell another live process under this member id from a crashed earlier run",
			h.shownRole(), h.shownMember(), watch), true)
	case registered && h.config.HeartbeatInterval() > 0 && !entry.LapsedAt(now, h.config):
		// A standby writes a heartbeat at least every heartbeat interval
		// plus one poll interval: the wait reads this process's clock only.
		watch = h.config.HeartbeatInterval() + h.flags.lease.poll + time.Second
		h.report(holderEvent{Event: "checking_duplicate"}, fmt.Sprintf("krabka-coord: member %s of role %s is registered as a standby (last seen %s): waiting up to %v for its next heartbeat, to tell another live process under this member id from a crashed earlier run",
			h.shownMember(), h.shownRole(), formatAgo(entry.LastSeen, now), watch), true)
	default:
		return nil
	}
	watchCtx, cancel := context.WithTimeout(ctx, watch)
	defer cancel()
	next := int64(0)
	if len(records) > 0 {
		next = records[len(records)-1].Offset + 1
	}
	changed, stop := h.transport.WatchRoles(h.partition, h.role)
	defer stop()
	for {
		more, n, err := h.transport.ReadRolesFrom(watchCtx, h.partition, []coordination.Role{h.role}, next)
		if err == nil {
			next = n
			for _, record := range more {
				_ = builder.Apply(record)
			}
			state := builder.Build()
			if renewed := state.Lease; lease != nil && lease.Member == h.member && renewed != nil && renewed.Member == h.member && renewed.Token == lease.Token && renewed.GrantedAt > lease.GrantedAt {
				return usageError("member %s of role %s is in use by another live process: it holds the role under token %s and renewed its lease at %s; two processes under one member id would fence each other: give this process another MEMBER, or stop the other one",
					h.shownMember(), h.shownRole(), lease.Token, formatMillis(renewed.GrantedAt))
			}
			if seen, ok := state.Entry(h.member); lease == nil || lease.Member != h.member {
				if ok && (seen.LastSeen > entry.LastSeen || seen.Offset != entry.Offset) {
					return usageError("member %s of role %s is in use by another live process: it waits as a standby and was seen at %s; two processes under one member id would end each other's campaign: give this process another MEMBER, or stop the other one",
						h.shownMember(), h.shownRole(), formatMillis(seen.LastSeen))
				}
				if !ok {
					return nil // the other process left the roster
				}
			}
		}
		select {
		case <-watchCtx.Done():
			if interruptedBy(ctx) {
				return interruptedError("before member " + h.shownMember() + " registered")
			}
			h.leaseWatched = lease != nil && lease.Member == h.member
			return nil
		case <-changed:
		}
	}
}
