package main

// The leak check of the package's tests: every goroutine that a test
// started, in process, has ended when the last test returns.

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine that a test started
// is still running after the last test: every goroutine has an owner that
// ends it. The helper processes (TestHelperProcess, TestHeartbeatHelper)
// are runs of this binary too; they exit, or are killed, inside their
// test, so the check never runs in them.
//
// It first gives the processes that the tests start SIGHUP's default
// disposition, when the test process was started with SIGHUP ignored (as
// under nohup), and plays the nohup wrapper of startIgnoringSIGHUP.
func TestMain(m *testing.M) {
	if os.Getenv(nohupEnv) != "" {
		execIgnoringSIGHUP()
	}
	sighupIgnoredAtStart = childrenStartWithDefaultSIGHUP()
	goleak.VerifyTestMain(m)
}
