package kafkawire

import (
	"testing"
	"time"
)

// TestClientWaitsFollowTheLease: the wire's clients give up on a request
// without a timeout of its own after one renew interval (1-10 s), and
// retry after 50 ms doubling to 500 ms, with franz-go's jitter.
func TestClientWaitsFollowTheLease(t *testing.T) {
	for _, tc := range []struct {
		lease, renew time.Duration
		want         time.Duration
	}{
		{6 * time.Second, 2 * time.Second, 2 * time.Second},
		{30 * time.Second, 10 * time.Second, 10 * time.Second},
		{90 * time.Second, 30 * time.Second, 10 * time.Second}, // franz-go's default is the ceiling
		{1500 * time.Millisecond, 300 * time.Millisecond, time.Second},
	} {
		if got := RequestTimeoutOverhead(tc.renew); got != tc.want {
			t.Errorf("RequestTimeoutOverhead(renew %s) of a lease of %s = %s; want %s", tc.renew, tc.lease, got, tc.want)
		}
	}
	for fails, want := range map[int]time.Duration{0: 50 * time.Millisecond, 1: 50 * time.Millisecond, 2: 100 * time.Millisecond,
		4: 400 * time.Millisecond, 5: 500 * time.Millisecond, 30: 500 * time.Millisecond} {
		for range 20 {
			if got := RetryBackoff(fails); got < want*8/10 || got >= want*12/10 {
				t.Errorf("RetryBackoff(%d) = %s; want %s ± 20%%", fails, got, want)
			}
		}
	}
}
