package coordination

import "context"

// Context returns a context that is cancelled when the leadership ends, for
// any reason that [Leadership.Done] names, with [Leadership.Err] as its
// cause ([context.Cause]); its Err is [context.Canceled]. Pass it to the
// work of the role, so that the work stops when the leadership does:
//
//	leader, err := coordination.AcquireLeadership(ctx, transport, role, me)
//	...
//	work(leader.Context(), leader) // returns when the leadership ends
//
// It is the same context on every call, it carries no deadline and no
// value, and it does not end with the context of [AcquireLeadership]: join
// it with a context of your own ([context.AfterFunc]) to stop at the
// earlier of the two. An [Elector] hands OnStartedLeading such a join.
//
// The context learns of a fence when the leadership does, at the next
// renewal or guarded write; with [WithRenewDeadline] it also ends on the
// holder's own lease clock. It is safe for concurrent use.
func (l *Leadership) Context() context.Context { return l.ctx }
