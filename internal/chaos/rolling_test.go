package chaos

import (
	"slices"
	"testing"
)

// TestLeadershipChangesIgnoreATakenBackOffer: a transfer's offer (the
// target named under the holder's token) and its take-back are no
// leadership change, though Handovers counts both; a transfer taken (the
// target's lease under its own token) and a re-acquisition by another
// member are one each; a member that mints again after its own lease is
// none.
func TestLeadershipChangesIgnoreATakenBackOffer(t *testing.T) {
	l := newStateLog(t)
	l.register("m1", 0)
	l.register("m2", 10)
	l.register("m3", 20)
	l.lease("m1", 1, 100, 6100)
	l.lease("m3", 1, 1000, 7000)  // an offer to m3, under m1's token
	l.lease("m1", 1, 4000, 10000) // not taken: m1's take-back
	l.lease("m2", 1, 5000, 11000) // an offer to m2
	l.lease("m2", 2, 5020, 11020) // taken: m2's own lease
	l.lease("m2", 2, 7020, 13020) // a renewal
	l.resign(8000)
	l.lease("m3", 3, 8050, 14050) // after a resignation
	l.lease("m3", 4, 9000, 15000) // m3 again, minted anew: no change

	got, err := LeadershipChanges(l.role, l.records)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{5020, 8050}; !slices.Equal(got, want) {
		t.Errorf("LeadershipChanges = %v; want %v (the taken transfer, the change after the resignation)", got, want)
	}
	handovers, err := Handovers(l.role, l.records)
	if err != nil {
		t.Fatal(err)
	}
	if len(handovers) != 4 {
		t.Errorf("Handovers = %v; want 4 leaseholder changes (offer, take-back, offer, m3)", handovers)
	}
	l.add([]byte("not a key"), nil, 9999)
	if _, err := LeadershipChanges(l.role, l.records); err == nil {
		t.Error("LeadershipChanges over a malformed key: no error")
	}
}

// TestClassifyTransferError names the fault of a TransferError's text.
func TestClassifyTransferError(t *testing.T) {
	for text, want := range map[string]string{
		"coordination: transfer of role r from m1 to ghost: not a member: ghost is not in the roster": "not a member",
		"coordination: transfer of role r from m1 to m2: member dead: its newest heartbeat is old":    "member dead",
		"coordination: transfer of role r from m1 to m2: not taken: m2 did not take the role":         "not taken",
		"coordination: transfer of role r from m1 to m1: to self: the member holds the role already":  "to self",
		"coordination: transfer of role r from m1 to m2: busy: another transfer":                      "busy",
		"context deadline exceeded": "",
		"":                          "",
	} {
		if got := ClassifyTransferError(text); got != want {
			t.Errorf("ClassifyTransferError(%q) = %q; want %q", text, got, want)
		}
	}
}
