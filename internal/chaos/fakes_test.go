package chaos

import (
	"context"
	"fmt"
	"sync"
)

// The fakes of the nemesis tests: a member-side and a cluster-side
// implementation that record what the nemesis does, in one order.

// fakeActions records what the nemesis does.
type fakeActions struct {
	mu      sync.Mutex
	calls   []string
	leaders map[string]string
}

func (f *fakeActions) record(s string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
	return nil
}

func (f *fakeActions) Pause(m string) error { return f.record("pause " + m) }

func (f *fakeActions) Resume(m string) error { return f.record("resume " + m) }

func (f *fakeActions) Kill(m string) error { return f.record("kill " + m) }

func (f *fakeActions) Restart(m string) error { return f.record("restart " + m) }

func (f *fakeActions) Cut(m string, mode CutMode) error {
	return f.record("cut " + m + " " + string(mode))
}

func (f *fakeActions) Heal(m string) error { return f.record("heal " + m) }

func (f *fakeActions) Skew(m string, ms int64) error { return f.record("skew " + m) }

func (f *fakeActions) RestartBroker(context.Context) error { return f.record("broker") }

func (f *fakeActions) LeaderOf(role string) (string, bool) {
	m, ok := f.leaders[role]
	return m, ok
}

func (f *fakeActions) RolesOf(member string) []string {
	var out []string
	for role, m := range f.leaders {
		if m == member {
			out = append(out, role)
		}
	}
	return out
}

// fakeCluster records what the nemesis does to the nodes, into the log of
// a fakeActions, so that member and cluster faults share one order.
type fakeCluster struct {
	actions *fakeActions
	coord   int32
}

func (c *fakeCluster) NodeIDs() []int32 { return []int32{1, 2, 3} }

func (c *fakeCluster) TxnCoordinator(_ context.Context, id string) (int32, error) {
	return c.coord, c.actions.record("find coordinator " + id)
}

func (c *fakeCluster) StateLeader(context.Context) (int32, error) { return 3, nil }

func (c *fakeCluster) ActiveController(context.Context) (int32, error) { return 1, nil }

func (c *fakeCluster) KillNode(_ context.Context, id int32) error {
	return c.actions.record(fmt.Sprintf("kill node %d", id))
}

func (c *fakeCluster) RestartNode(_ context.Context, id int32) error {
	return c.actions.record(fmt.Sprintf("restart node %d", id))
}

func (c *fakeCluster) PauseNode(_ context.Context, id int32) error {
	return c.actions.record(fmt.Sprintf("pause node %d", id))
}

func (c *fakeCluster) ResumeNode(_ context.Context, id int32) error {
	return c.actions.record(fmt.Sprintf("resume node %d", id))
}

func (c *fakeCluster) AwaitRecovered(context.Context) error { return c.actions.record("recovered") }
