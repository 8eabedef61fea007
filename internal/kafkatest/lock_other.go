//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package kafkatest

import "time"

// lockFile does nothing where the tests have no flock: the tests that share
// a transactional id then must not run at the same time.
func lockFile(string, time.Duration) (func(), error) { return func() {}, nil }
