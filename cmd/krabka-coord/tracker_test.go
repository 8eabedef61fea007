package main

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// kinds writes events as "kind:member ...".
func kinds(events []roleEvent) string {
	var k []string
	for _, e := range events {
		k = append(k, e.Kind+":"+e.Member)
	}
	return strings.Join(k, " ")
}

// watch shows a lease that comes back after an outage (restored), and a
// holder that takes the role again under a new token (reacquired), which
// it printed as "m3 took over ... from m3" (issue 10, bug 8).
func TestWatchEventsRestoredAndReacquired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		role := mustRole(t, "controller")
		t1, t2 := mustToken(t, 7, 1), mustToken(t, 7, 2)
		feed := startFeed(t, role, coordination.DefaultLeaseConfig(), 900)
		defer feed.stop()
		feed.log.add(registration(role, "m3", 0, 1000), leaseRecord(role, "m3", t1, 1, 1000, 4000))
		if events := feed.at(3000); kinds(events) != "registered:m3 granted:m3" {
			t.Fatalf("events = %s", kinds(events))
		}
		if events := feed.at(4500); len(events) != 1 || events[0].Kind != eventExpired {
			t.Fatalf("expiry = %+v", events)
		}
		feed.log.add(leaseRecord(role, "m3", t1, 2, 6000, 9000))
		events := feed.at(6000)
		if len(events) != 1 || events[0].Kind != eventRestored || events[0].PreviousDeadline.Millis != 4000 ||
			!strings.Contains(events[0].Message, "m3 renewed token 7:1 2.00s after its lease expired: the holder is back") {
			t.Fatalf("renewal after the expiry = %+v; want restored", events)
		}
		feed.log.add(leaseRecord(role, "m3", t1, 3, 7000, 10000))
		events = feed.at(7000)
		if len(events) != 1 || events[0].Kind != eventRenewed {
			t.Fatalf("a plain renewal = %+v; want renewed", events)
		}
		feed.log.add(leaseRecord(role, "m3", t2, 4, 8000, 11000))
		events = feed.at(8000)
		if len(events) != 1 || events[0].Kind != eventReacquired || events[0].Member != "m3" || tokenText(events[0].PreviousToken) != "7:1" {
			t.Fatalf("a new token of the same holder = %+v; want reacquired", events)
		}
		if msg := events[0].Message; strings.Contains(msg, "from m3") || !strings.Contains(msg, "m3 took the role again with a new token 7:2") {
			t.Fatalf("message %q", msg)
		}
	})
}

// watch reports a standby that heartbeated and whose rank lapsed (no
// heartbeat for 3 intervals) once, never the holder, and again only after a new silence;
// a standby lapsed when watch starts is in the state line, not an event.
func TestWatchEventsLapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		role := mustRole(t, "controller")
		t1 := mustToken(t, 7, 1)
		view, err := rosterView(time.Second) // lapse 3 s
		if err != nil {
			t.Fatal(err)
		}
		feed := startFeed(t, role, view, 3600,
			registration(role, "holder", 0, 1000),
			registration(role, "dead", 1, 1000),
			registration(role, "old", 2, 500),
			leaseRecord(role, "holder", t1, 3, 1000, 30000),
			heartbeatRecord(role, "dead", 4, 1000), // each heartbeated once, right after it registered
			heartbeatRecord(role, "old", 5, 500),
		)
		defer feed.stop()
		if events := feed.take(); len(events) != 0 {
			t.Fatalf("the start reported %+v", events)
		}
		if len(feed.states) != 1 {
			t.Fatalf("%d states; want 1", len(feed.states))
		}
		if state := buildDescribe(role, feed.states[0].Partition, feed.states[0].State, coordination.LeadershipStatus{Role: role}, feed.states[0].At, view); !strings.Contains(summarize(state), "old (lapsed)") {
			t.Fatalf("the state line %q; want old lapsed in it", summarize(state))
		}
		if events := feed.at(3900); len(events) != 0 {
			t.Fatalf("at 3.9 s: %+v; want none (old was lapsed at the start, dead lapses after 4 s)", events)
		}
		events := feed.at(4100)
		if len(events) != 1 || events[0].Kind != eventLapsed || events[0].Member != "dead" || !strings.Contains(events[0].Message, "dead lapsed: not seen since") ||
			events[0].Offset == nil || *events[0].Offset != 1 {
			t.Fatalf("at 4.1 s: %+v; want dead lapsed, with the offset of its registration", events)
		}
		if events := feed.at(20000); len(events) != 0 {
			t.Fatalf("reported twice: %+v", events)
		}
		member, _ := coordination.NewMemberID("dead")
		feed.log.add(coordination.StateRecord{Offset: 6, Key: coordination.EncodeKey(coordination.HeartbeatKey(role, member)),
			Value: coordination.EncodeHeartbeat(coordination.Heartbeat{Member: member, SeenAt: 21000})})
		if events := feed.at(21000); len(events) != 0 {
			t.Fatalf("a heartbeat made events: %+v", events)
		}
		if events := feed.at(24100); len(events) != 1 || events[0].Member != "dead" {
			t.Fatalf("after a new silence: %+v; want dead lapsed again", events)
		}
	})
}
