package main

import (
	"strings"
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// watch shows a lease that comes back after an outage (restored), and a
// holder that takes the role again under a new token (reacquired), which
// it printed as "m3 took over ... from m3" (issue 10, bug 8).
func TestEventsRestoredAndReacquired(t *testing.T) {
	role := mustRole(t, "controller")
	t1, t2 := mustToken(t, 7, 1), mustToken(t, 7, 2)
	first := coordination.Lease{Member: mustMember(t, "m3"), Token: t1, GrantedAt: 1000, Deadline: 4000}
	log := []coordination.StateRecord{registration(role, "m3", 0, 1000), leaseRecord(role, "m3", t1, 1, 1000, 4000)}

	restored, ok := eventOf(change(t, coordination.ChangeRestored, role, "m3", 6000, &first, append(log, leaseRecord(role, "m3", t1, 2, 6000, 9000))...))
	if !ok || restored.Kind != eventRestored || restored.PreviousDeadline.Millis != 4000 ||
		!strings.Contains(restored.Message, "m3 renewed token 7:1 2.00s after its lease expired: the holder is back") {
		t.Fatalf("renewal after the expiry = %+v; want restored", restored)
	}
	renewed, ok := eventOf(change(t, coordination.ChangeRenewed, role, "m3", 7000, &first, append(log, leaseRecord(role, "m3", t1, 3, 7000, 10000))...))
	if !ok || renewed.Kind != eventRenewed || !strings.Contains(renewed.Message, "m3 renewed token 7:1") {
		t.Fatalf("a plain renewal = %+v; want renewed", renewed)
	}
	again, ok := eventOf(change(t, coordination.ChangeReacquired, role, "m3", 8000, &first, append(log, leaseRecord(role, "m3", t2, 4, 8000, 11000))...))
	if !ok || again.Kind != eventReacquired || again.Member != "m3" || tokenText(again.PreviousToken) != "7:1" {
		t.Fatalf("a new token of the same holder = %+v; want reacquired", again)
	}
	if msg := again.Message; strings.Contains(msg, "from m3") || !strings.Contains(msg, "m3 took the role again with a new token 7:2") {
		t.Fatalf("message %q", msg)
	}
}
