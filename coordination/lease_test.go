package coordination_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

func TestDefaultLeaseConfig(t *testing.T) {
	config := coordination.DefaultLeaseConfig()
	if config.Duration() != 30*time.Second || config.RenewInterval() != 10*time.Second || config.ChallengeStagger() != 5*time.Second {
		t.Errorf("DefaultLeaseConfig = %v, %v, %v; want 30s, 10s, 5s", config.Duration(), config.RenewInterval(), config.ChallengeStagger())
	}
	if coordination.DefaultLeaseDuration != 30*time.Second || coordination.DefaultRenewInterval != 10*time.Second ||
		coordination.DefaultChallengeStagger != 5*time.Second || coordination.DefaultPollInterval != time.Second {
		t.Errorf("default constants differ from the spec")
	}
	if !config.RenewsWithMargin() {
		t.Errorf("the default config renews without margin")
	}
	same, err := coordination.NewLeaseConfig(coordination.DefaultLeaseDuration, coordination.DefaultRenewInterval, coordination.DefaultChallengeStagger)
	if err != nil || same != config {
		t.Errorf("NewLeaseConfig(defaults) = %+v, %v; want DefaultLeaseConfig()", same, err)
	}
}

func TestNewLeaseConfigRejects(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name                     string
		duration, renew, stagger time.Duration
		names                    string // the extent the error names
	}{
		{"zero duration", 0, 10 * s, 5 * s, "lease duration"},
		{"negative duration", -30 * s, 10 * s, 5 * s, "lease duration"},
		{"zero renew interval", 30 * s, 0, 5 * s, "renew interval"},
		{"negative renew interval", 30 * s, -1, 5 * s, "renew interval"},
		{"zero stagger", 30 * s, 10 * s, 0, "challenge stagger"},
		{"negative stagger", 30 * s, 10 * s, -5 * s, "challenge stagger"},
		{"renew interval equal to the duration", 30 * s, 30 * s, 5 * s, "renew interval"},
		{"renew interval above the duration", 30 * s, 40 * s, 5 * s, "renew interval"},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			config, err := coordination.NewLeaseConfig(test.duration, test.renew, test.stagger)
			if err == nil {
				t.Fatalf("NewLeaseConfig(%v, %v, %v) = %+v, want an error", test.duration, test.renew, test.stagger, config)
			}
			if !strings.Contains(err.Error(), test.names) {
				t.Errorf("error %q does not name the %s", err, test.names)
			}
			if config != (coordination.LeaseConfig{}) {
				t.Errorf("a rejected config is not the zero value: %+v", config)
			}
		})
	}
}

func TestNewLeaseConfigAcceptsTheEdges(t *testing.T) {
	for _, c := range [][3]time.Duration{
		{2 * time.Millisecond, time.Millisecond, time.Millisecond},
		{30 * time.Second, 30*time.Second - time.Millisecond, time.Millisecond},
		{30 * time.Second, 29 * time.Second, 24 * time.Hour},
		{1500 * time.Microsecond, time.Millisecond, 1500 * time.Microsecond},
	} {
		config, err := coordination.NewLeaseConfig(c[0], c[1], c[2])
		if err != nil {
			t.Errorf("NewLeaseConfig(%v, %v, %v): %v", c[0], c[1], c[2], err)
			continue
		}
		if config.Duration() != c[0] || config.RenewInterval() != c[1] || config.ChallengeStagger() != c[2] {
			t.Errorf("NewLeaseConfig(%v, %v, %v) kept %v, %v, %v", c[0], c[1], c[2], config.Duration(), config.RenewInterval(), config.ChallengeStagger())
		}
	}
}

func TestRenewsWithMargin(t *testing.T) {
	tests := []struct {
		duration, renew time.Duration
		want            bool
	}{
		{30 * time.Second, 10 * time.Second, true}, // exactly a third
		{30 * time.Second, 10*time.Second + time.Millisecond, false},
		{30 * time.Second, time.Second, true},
		{30 * time.Second, 29 * time.Second, false},
		{3 * time.Millisecond, time.Millisecond, true},
		{2 * time.Millisecond, time.Millisecond, false},
	}
	for _, test := range tests {
		config, err := coordination.NewLeaseConfig(test.duration, test.renew, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got := config.RenewsWithMargin(); got != test.want {
			t.Errorf("RenewsWithMargin(%v, %v) = %t, want %t", test.duration, test.renew, got, test.want)
		}
	}
}

func TestChallengeDelay(t *testing.T) {
	config := coordination.DefaultLeaseConfig()
	tests := []struct {
		rank int
		want time.Duration
	}{
		{-1, 0},
		{math.MinInt, 0},
		{0, 0},
		{1, 5 * time.Second},
		{2, 10 * time.Second},
		{1000, 5000 * time.Second},
		// The largest rank whose delay fits, and the first that saturates.
		{math.MaxInt64 / int(5*time.Second), time.Duration(math.MaxInt64/int64(5*time.Second)) * 5 * time.Second},
		{math.MaxInt64/int(5*time.Second) + 1, math.MaxInt64},
		{math.MaxInt, math.MaxInt64},
	}
	for _, test := range tests {
		if got := config.ChallengeDelay(test.rank); got != test.want {
			t.Errorf("ChallengeDelay(%d) = %d, want %d", test.rank, got, test.want)
		}
	}
	previous := time.Duration(0)
	for rank := range 64 {
		r := 1<<rank - 1
		delay := config.ChallengeDelay(r)
		if delay < previous {
			t.Fatalf("ChallengeDelay(%d) = %d wraps below ChallengeDelay of a lower rank (%d)", r, delay, previous)
		}
		previous = delay
	}
}

func TestGrant(t *testing.T) {
	config := fxConfig(t, 30000, 10000, 5000)
	member, token := fxMember(t, "node-1"), fxToken(t, 4242, 7)
	lease := config.Grant(member, token, 1_700_000_000_000)
	want := coordination.Lease{Member: member, Token: token, GrantedAt: 1_700_000_000_000, Deadline: 1_700_000_030_000}
	if lease != want {
		t.Errorf("Grant = %+v, want %+v", lease, want)
	}
	if far := config.Grant(member, token, math.MaxInt64-10); far.Deadline != math.MaxInt64 {
		t.Errorf("Grant near the end of time: deadline %d, want it saturated at MaxInt64", far.Deadline)
	}
}

func TestLeaseTimingBoundaries(t *testing.T) {
	config := fxConfig(t, 30000, 10000, 5000)
	lease := coordination.Lease{Member: fxMember(t, "node-1"), Token: fxToken(t, 1, 1), GrantedAt: 100_000, Deadline: 130_000}
	timing := config.Timing(lease)
	if timing != coordination.NewLeaseTiming(lease, config) {
		t.Errorf("config.Timing and NewLeaseTiming differ")
	}
	if timing.Lease() != lease || timing.ExpiresAt() != 130_000 {
		t.Errorf("Lease() = %+v, ExpiresAt() = %d", timing.Lease(), timing.ExpiresAt())
	}

	liveAt := map[int64]bool{100_000: true, 129_999: true, 130_000: false, 130_001: false, 0: true, math.MaxInt64: false}
	for now, want := range liveAt {
		if got := timing.LiveAt(now); got != want {
			t.Errorf("LiveAt(%d) = %t, want %t (deadline 130000)", now, got, want)
		}
	}

	remaining := map[int64]time.Duration{
		100_000:       30 * time.Second,
		129_999:       time.Millisecond,
		130_000:       0,
		130_001:       0,
		math.MaxInt64: 0,
	}
	for now, want := range remaining {
		if got := timing.RemainingAt(now); got != want {
			t.Errorf("RemainingAt(%d) = %v, want %v", now, got, want)
		}
	}

	if got := timing.RenewAt(); got != 110_000 {
		t.Errorf("RenewAt() = %d, want the grant plus the renew interval, 110000", got)
	}
	for now, want := range map[int64]bool{100_000: false, 109_999: false, 110_000: true, 130_000: true} {
		if got := timing.RenewDueAt(now); got != want {
			t.Errorf("RenewDueAt(%d) = %t, want %t", now, got, want)
		}
	}

	for rank, want := range map[int]int64{-1: 130_000, 0: 130_000, 1: 135_000, 2: 140_000, 10: 180_000} {
		if got := timing.ChallengeAt(rank); got != want {
			t.Errorf("ChallengeAt(%d) = %d, want %d", rank, got, want)
		}
	}
	// The rank 0 challenge starts exactly where the lease stops being live.
	if timing.LiveAt(timing.ChallengeAt(0)) || !timing.LiveAt(timing.ChallengeAt(0)-1) {
		t.Errorf("LiveAt and ChallengeAt(0) leave a gap or an overlap")
	}
}

func TestRenewAtNeverPassesTheDeadline(t *testing.T) {
	// A lease written under a shorter duration than the reader's renew
	// interval: the grant plus the renew interval lies past the deadline.
	config := fxConfig(t, 30000, 10000, 5000)
	lease := coordination.Lease{Member: fxMember(t, "node-1"), Token: fxToken(t, 1, 1), GrantedAt: 1000, Deadline: 6000}
	timing := config.Timing(lease)
	if got := timing.RenewAt(); got != 6000 {
		t.Errorf("RenewAt() = %d, want it capped at the deadline 6000", got)
	}
	if timing.RenewDueAt(5999) || !timing.RenewDueAt(6000) {
		t.Errorf("RenewDueAt around the capped instant is wrong")
	}
	far := config.Timing(coordination.Lease{GrantedAt: math.MaxInt64 - 1, Deadline: math.MaxInt64})
	if got := far.RenewAt(); got != math.MaxInt64 {
		t.Errorf("RenewAt() near the end of time = %d, want MaxInt64", got)
	}
}

func TestLeaseClockSaturates(t *testing.T) {
	config := coordination.DefaultLeaseConfig()
	near := config.Timing(coordination.Lease{Deadline: math.MaxInt64 - 1000})
	for _, rank := range []int{1, 2, 1 << 20, math.MaxInt} {
		if got := near.ChallengeAt(rank); got != math.MaxInt64 {
			t.Errorf("ChallengeAt(%d) with a deadline near MaxInt64 = %d, want MaxInt64", rank, got)
		}
	}
	if got := near.ChallengeAt(0); got != math.MaxInt64-1000 {
		t.Errorf("ChallengeAt(0) = %d, want the deadline", got)
	}
	normal := config.Timing(coordination.Lease{Deadline: 1_700_000_030_000})
	previous := int64(math.MinInt64)
	for _, rank := range []int{0, 1, 2, 1 << 10, 1 << 30, 1 << 40, math.MaxInt / 2, math.MaxInt} {
		at := normal.ChallengeAt(rank)
		if at < previous || at < 1_700_000_030_000 {
			t.Errorf("ChallengeAt(%d) = %d wraps (previous rank gave %d)", rank, at, previous)
		}
		previous = at
	}
	// The saturated delay is the largest time.Duration, rounded up to a
	// whole millisecond.
	if got, want := normal.ChallengeAt(math.MaxInt), int64(1_700_000_030_000+9_223_372_036_855); got != want {
		t.Errorf("ChallengeAt(MaxInt) = %d, want %d", got, want)
	}

	// The extent left is never negative, however far apart the two instants.
	wide := config.Timing(coordination.Lease{Deadline: math.MaxInt64})
	for _, now := range []int64{math.MinInt64, -1, 0, 1_700_000_000_000} {
		if got := wide.RemainingAt(now); got <= 0 {
			t.Errorf("RemainingAt(%d) with deadline MaxInt64 = %v, want a positive extent", now, got)
		}
	}
	if got := wide.RemainingAt(0); got != math.MaxInt64 {
		t.Errorf("RemainingAt(0) with deadline MaxInt64 = %d, want it saturated", got)
	}
}

func TestSubMillisecondStaggerNeverChallengesEarly(t *testing.T) {
	config, err := coordination.NewLeaseConfig(30*time.Second, 10*time.Second, 1500*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	timing := config.Timing(coordination.Lease{Deadline: 1000})
	if got := timing.ChallengeAt(1); got != 1002 {
		t.Errorf("ChallengeAt(1) with a 1.5ms stagger = %d, want 1002 (rounded up, never early)", got)
	}
	if got := timing.ChallengeAt(2); got != 1003 {
		t.Errorf("ChallengeAt(2) with a 1.5ms stagger = %d, want 1003", got)
	}
}
