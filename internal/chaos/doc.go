// Package chaos is the fault-injection harness of package coordination and
// the checker of its runs. The command cmd/krabka-chaos drives it.
//
// A run has three parts:
//
//   - Members. Each member is an operating-system process that competes for
//     every role with [coordination.AcquireLeadership] and, while it leads a
//     role, appends numbered commands to the command topic of the run with
//     [coordination.Leadership.Write]. Each command carries the role, the
//     member, the incarnation of the member process, the fencing token of the
//     leadership, a sequence number and the wall time; with a spread of 2
//     or more ([RunInfo].CommandSpread) it is one Write of 2 or 3 records
//     over the role's partitions, each record carrying its part index and
//     the part count, so that a torn transaction shows. The member logs
//     whether each Write was acknowledged, refused, reported as not
//     committed, or reported with an unknown outcome (writeResult). A member appends every
//     acknowledged command to its ack log, one line per write(2) on a file
//     opened with O_APPEND, so the log survives a SIGKILL of the member. See
//     [Member].
//   - The nemesis. It draws a fault schedule from a seed ([Plan]) and plays
//     it against the members: SIGSTOP and SIGCONT, SIGKILL and a restart
//     under the same member id, a cut of the network between one member and
//     the broker (every member reaches the broker through its own [Proxy],
//     one that reads Kafka's framing), a fault of one request of a chosen
//     API key at that proxy ([FaultRequest]: a delay, a lost answer, a hold
//     until the client resent it, a duplicate, a reset with a late
//     delivery, an answer with an error code, applied or not, drawn from
//     internal/kafkacodes' table of each key's codes; requestfault.go), an offset
//     of the clock of one member ([SkewClock]), and a restart of the
//     broker. It logs every fault with its wall time, kind and target.
//   - The checker. [Check] reads the command topic read_committed from the
//     start, the state topic, the ack and event logs of the members and the
//     nemesis log, and verifies per role that leadership terms never
//     interleave, that every acknowledged command is present exactly once
//     and whole, that no command is visible in part (torn), that no command
//     the broker refused or the library reported as not committed is
//     present (a false report), and how long each failover took after a
//     fault of the leader. It gives each refusal with ErrFenced its cause
//     (attribution.go, [FenceAttribution]): the pair that fenced the token
//     (its producer id, its epoch + 1), looked up among the pairs that each
//     faulted InitProducerId minted, the rivals' acquisitions, the lease
//     records and the mint log (mints.log: every InitProducerId answer
//     that passed a member's proxy, [Mint]), else the instants: a rival's
//     mint, a rival's late copy, the member's own late copy (a
//     self-fence), the proxy's duplicate, or unexplained. Beside it,
//     [CheckLinearizable] checks the history of every acquisition and
//     guarded write (members/<id>.history) and the final read with
//     Porcupine (github.com/anishathalye/porcupine) against a model of a
//     fenced command log in which a Write lands whole or not at all; a run
//     passes only when both pass.
//
// The fast twin of the request nemesis, on kfake, is package
// internal/kfakefault of the library module.
//
// [OrchestrateMixed] lays out a run of another shape: no nemesis, members
// of two builds of the member binary (two releases of package
// coordination) on one role through a rolling upgrade and a rollback,
// which [CheckRun] checks like any run, and [Handovers] reads for the
// handovers of the holder (docs/upgrades.md).
//
// [OrchestrateRolling] lays out a rolling restart of one role, by the
// transfer procedure of docs/operations.md and by the resign procedure
// before it, in one run; [MeasureRolling] reports each procedure's
// leadership changes, epochs and longest gap without an acknowledged
// command.
//
// The files of a run live in one directory: see [RunInfo] for the layout.
package chaos
