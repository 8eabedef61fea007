package kafkatest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// LockTransactionalIDs serialises, between the test processes of this
// machine, the tests that take the same fixed transactional ids on the real
// broker, such as controller and archiver, which share partition 12 of 16
// of the state topic. A transactional id is global to the cluster: a test
// that mints one fences every other holder of it, and aborts its open
// transaction, so two such tests that run at once (two packages, two
// sessions, two -count iterations of different binaries) depose each
// other's members. The lock is a file lock per id and broker under
// os.TempDir(), held until the test ends. It waits up to 3 minutes for a
// lock, and logs the wait. On kfake, whose ids are the test's own, it does
// nothing.
func (c *Cluster) LockTransactionalIDs(t testing.TB, ids ...string) {
	t.Helper()
	if !c.Real {
		return
	}
	ids = slices.Sorted(slices.Values(ids)) // one order for everyone: no deadlock
	ids = slices.Compact(ids)
	cluster := strings.NewReplacer(":", "_", "/", "_", ",", "_").Replace(strings.Join(c.Brokers, ","))
	for _, id := range ids {
		path := filepath.Join(os.TempDir(), "krabka-kafkatest-"+cluster+"-txn-"+strings.NewReplacer("/", "_").Replace(id)+".lock")
		start := time.Now()
		unlock, err := lockFile(path, 3*time.Minute)
		if err != nil {
			t.Fatalf("kafkatest: lock the transactional id %s (%s): %v", id, path, err)
		}
		if waited := time.Since(start); waited > 100*time.Millisecond {
			t.Logf("kafkatest: waited %v for another test of this machine to release the transactional id %s", waited.Round(time.Millisecond), id)
		}
		t.Cleanup(unlock)
	}
}
