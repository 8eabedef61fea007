package kafkawire

// The narrowing of a value into a wire field narrower than the Go value:
// int32 milliseconds, int32 counts, int16 counts. Each is checked where
// the value is built, with an error that names the field and its limit,
// so that nothing wraps on its way to the broker (a lease of 2^32 ms +
// 5 s once reached the broker as a transaction timeout of 5 s).

import (
	"fmt"
	"math"
	"time"
)

// Millis32 returns d in whole milliseconds for the int32 wire field named
// field, or an error that names the field and the limit for a d below
// zero or above math.MaxInt32 ms (about 24.8 days).
func Millis32(field string, d time.Duration) (int32, error) {
	ms := d.Milliseconds()
	if ms < 0 || ms > math.MaxInt32 {
		return 0, fmt.Errorf("%s %v does not fit the request's int32 milliseconds: want 0 to %d ms (%v)",
			field, d, math.MaxInt32, time.Duration(math.MaxInt32)*time.Millisecond)
	}
	return int32(ms), nil
}

// Int32 returns n for the int32 wire field named field, or an error that
// names the field and the range lo..math.MaxInt32.
func Int32(field string, n int, lo int32) (int32, error) {
	if n < math.MinInt32 || n > math.MaxInt32 || n < int(lo) {
		return 0, fmt.Errorf("%s %d does not fit the request's int32: want %d to %d", field, n, lo, math.MaxInt32)
	}
	return int32(n), nil
}

// Int16 returns n for the int16 wire field named field, or an error that
// names the field and the range lo..math.MaxInt16.
func Int16(field string, n int, lo int16) (int16, error) {
	if n < math.MinInt16 || n > math.MaxInt16 || n < int(lo) {
		return 0, fmt.Errorf("%s %d does not fit the request's int16: want %d to %d", field, n, lo, math.MaxInt16)
	}
	return int16(n), nil
}

// clampMillis32 is d in whole milliseconds, clamped to the int32 range,
// for a wait that the package bounds itself (a fetch's long poll) and
// that a clamp cannot make wrong.
func clampMillis32(d time.Duration) int32 {
	ms := d.Milliseconds()
	switch {
	case ms < 0:
		return 0
	case ms > math.MaxInt32:
		return math.MaxInt32
	}
	return int32(ms)
}
