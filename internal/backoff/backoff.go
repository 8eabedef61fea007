// Package backoff computes the pauses between the attempts of a retry, for
// the library's Kafka machinery (coordination/internal/kafkawire) and the
// CLI (cmd/krabka-coord): a first pause that doubles after each failed
// attempt up to a bound, optionally with jitter. Each caller keeps its own
// timings; only the arithmetic is shared. It imports the standard library
// only.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Doubling is the pause of a retry loop: First before the first retry,
// then twice the previous pause, up to Max. The zero value of its state
// starts at First; a Doubling is not safe for concurrent use (each loop
// keeps its own).
type Doubling struct {
	First time.Duration // the first pause; positive
	Max   time.Duration // the bound of the pauses after the first; at least First

	next time.Duration // the pause that Next returns next; 0 for First
}

// Next returns the pause before the next attempt, and doubles the one
// after it, up to Max.
func (d *Doubling) Next() time.Duration {
	if d.next == 0 {
		d.next = d.First
	}
	pause := d.next
	if d.next < d.Max {
		d.next = min(2*d.next, d.Max)
	}
	return pause
}

// Reset makes the next pause First again (an attempt made progress).
func (d *Doubling) Reset() { d.next = 0 }

// After returns the pause after failures failed attempts in a row, as
// Doubling's Next gives it for the attempt of that number:
// first·2^(failures−1), at most limit; first for failures below 2 (when
// limit is at least first). It never overflows.
func After(first, limit time.Duration, failures int) time.Duration {
	pause := first
	for i := 1; i < failures && pause < limit; i++ {
		pause *= 2
	}
	return min(pause, limit)
}

// Jitter returns d times a factor drawn uniformly from [1−fraction,
// 1+fraction), so that the retries of many clients spread out. It is safe
// for concurrent use.
func Jitter(d time.Duration, fraction float64) time.Duration {
	return time.Duration(float64(d) * (1 - fraction + 2*fraction*rand.Float64()))
}
