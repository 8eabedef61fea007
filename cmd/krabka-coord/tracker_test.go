package main

import (
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// watch shows a lease that comes back after an outage (restored), and a
// holder that takes the role again under a new token (reacquired), which
// it printed as "m3 took over ... from m3" (issue 10, bug 8).
func TestTrackerRestoredAndReacquired(t *testing.T) {
	role := mustRole(t, "controller")
	t1, t2 := mustToken(t, 7, 1), mustToken(t, 7, 2)
	tracker := newRoleTracker(role)
	now := time.UnixMilli(3000)
	tracker.apply([]coordination.StateRecord{
		registration(role, "m3", 0, 1000),
		leaseRecord(role, "m3", t1, 1, 1000, 4000),
	}, now)
	if event, ok := tracker.checkExpiry(time.UnixMilli(4500)); !ok || event.Kind != eventExpired {
		t.Fatalf("expiry = %+v, %v", event, ok)
	}
	events := tracker.apply([]coordination.StateRecord{leaseRecord(role, "m3", t1, 2, 6000, 9000)}, time.UnixMilli(6000))
	if len(events) != 1 || events[0].Kind != eventRestored || events[0].PreviousDeadline.Millis != 4000 ||
		!strings.Contains(events[0].Message, "m3 renewed token 7:1 2.00s after its lease expired: the holder is back") {
		t.Fatalf("renewal after the expiry = %+v; want restored", events)
	}
	events = tracker.apply([]coordination.StateRecord{leaseRecord(role, "m3", t1, 3, 7000, 10000)}, time.UnixMilli(7000))
	if len(events) != 1 || events[0].Kind != eventRenewed {
		t.Fatalf("a plain renewal = %+v; want renewed", events)
	}
	events = tracker.apply([]coordination.StateRecord{leaseRecord(role, "m3", t2, 4, 8000, 11000)}, time.UnixMilli(8000))
	if len(events) != 1 || events[0].Kind != eventReacquired || events[0].Member != "m3" || tokenText(events[0].PreviousToken) != "7:1" {
		t.Fatalf("a new token of the same holder = %+v; want reacquired", events)
	}
	if msg := events[0].Message; strings.Contains(msg, "from m3") || !strings.Contains(msg, "m3 took the role again with a new token 7:2") {
		t.Fatalf("message %q", msg)
	}
}

// watch reports a standby whose rank lapsed (no heartbeat for 3
// intervals) once, never the holder, and again only after a new silence;
// a standby lapsed when watch starts is in the state line, not an event.
func TestTrackerLapsed(t *testing.T) {
	role := mustRole(t, "controller")
	t1 := mustToken(t, 7, 1)
	view, err := rosterView(time.Second) // lapse 3 s
	if err != nil {
		t.Fatal(err)
	}
	tracker := newRoleTracker(role)
	tracker.apply([]coordination.StateRecord{
		registration(role, "holder", 0, 1000),
		registration(role, "dead", 1, 1000),
		registration(role, "old", 2, 500),
		leaseRecord(role, "holder", t1, 3, 1000, 30000),
	}, time.UnixMilli(1000))
	if events := tracker.checkLapses(time.UnixMilli(3600), view, false); len(events) != 0 {
		t.Fatalf("marking at the start reported %+v", events)
	}
	if events := tracker.checkLapses(time.UnixMilli(3900), view, true); len(events) != 0 {
		t.Fatalf("at 3.9 s: %+v; want none (old was marked at the start, dead lapses after 4 s)", events)
	}
	events := tracker.checkLapses(time.UnixMilli(4100), view, true)
	if len(events) != 1 || events[0].Kind != eventLapsed || events[0].Member != "dead" || !strings.Contains(events[0].Message, "dead lapsed: not seen since") {
		t.Fatalf("at 4.1 s: %+v; want dead lapsed", events)
	}
	if events := tracker.checkLapses(time.UnixMilli(20000), view, true); len(events) != 0 {
		t.Fatalf("reported twice: %+v", events)
	}
	member, _ := coordination.NewMemberID("dead")
	tracker.apply([]coordination.StateRecord{{Offset: 4, Key: coordination.EncodeKey(coordination.HeartbeatKey(role, member)),
		Value: coordination.EncodeHeartbeat(coordination.Heartbeat{Member: member, SeenAt: 21000})}}, time.UnixMilli(21000))
	if events := tracker.checkLapses(time.UnixMilli(24100), view, true); len(events) != 1 || events[0].Member != "dead" {
		t.Fatalf("after a new silence: %+v; want dead lapsed again", events)
	}
}
