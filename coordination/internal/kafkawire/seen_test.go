package kafkawire

import (
	"fmt"
	"testing"
)

// The tests of the filter of groups seen: no false negative, few false
// positives at the size it is built for, and a reset that forgets.

func TestSeenGroups(t *testing.T) {
	var f seenGroups
	if f.mayHold("a") {
		t.Fatalf("an empty filter may hold a group")
	}
	const n = 10_000
	for i := range n {
		f.add([]byte(fmt.Sprintf("role-%d", i)))
	}
	for i := range n {
		if g := fmt.Sprintf("role-%d", i); !f.mayHold(g) {
			t.Fatalf("the filter lost %s", g)
		}
	}
	positives := 0
	for i := range n {
		if f.mayHold(fmt.Sprintf("other-%d", i)) {
			positives++
		}
	}
	// About 0.5 % at 10 000 groups; a walk that finds nothing is all a
	// false positive costs.
	if rate := float64(positives) / n; rate > 0.02 {
		t.Fatalf("%d false positives of %d (%.2f %%); want about 0.5 %%", positives, n, 100*rate)
	}
	t.Logf("false positives at %d groups: %d of %d", n, positives, n)
	f.reset()
	if f.mayHold("role-1") {
		t.Fatalf("a reset filter may hold a group")
	}
}
