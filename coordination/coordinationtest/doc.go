// Package coordinationtest provides an in-memory Kafka cluster for the tests
// of code built on package coordination.
//
// A [Cluster] models what package coordination relies on from Kafka, and
// nothing else: an append-only log for each partition with offsets from 0, a
// transaction coordinator that mints one epoch after the other for each role
// and fences every older token, and the compaction of a log. A [Transport]
// is the client of one member process over that cluster. It implements
// [coordination.Transport] and the whole [coordination.ExtendedTransport]
// (the operator's calls SetLeaseConfig, SetTopicPartitions, RecreateTopic
// and OpenTransaction of the [Cluster] shape what its extensions report),
// and it injects the faults a control
// plane must survive into the calls of one member: a member cut off from
// the cluster ([Transport.Cut]), a call that fails ([Transport.FailNext]),
// a reply that is lost after the call took effect
// ([Transport.LoseNextReply]), a call that hangs until the test releases it
// ([Transport.Block]), and reads that lag behind the log
// ([Transport.StaleReads]). [Transport.Calls] counts the calls of each
// [Op], so a test asserts what the code under test did not do as well as
// what it did. [Plain] hides the extensions, so a test also covers a
// transport of the specification's four interfaces, which only polls.
//
// # Determinism
//
// Nothing in this package starts a goroutine or reads a clock. Every call
// takes effect on the goroutine that makes it, before it returns, so a test
// that drives package coordination with a [coordination.ManualClock] decides
// the order of every event. Move the clock only after the code under test
// has parked on it. The sure way is to run the test in a [testing/synctest]
// bubble and call synctest.Wait before each move: every goroutine has then
// parked, and a leadership left running at the end of the test fails it.
// [coordination.ManualClock.BlockUntil] also counts waits that their caller
// abandoned (a wait that a new record or the end of a context cut short),
// so it can return before the code parks again. A test that needs to know
// that the code has reached a call, such as a renewal that
// [Transport.Block] holds, waits for it with [Transport.WaitCalls]. None of
// these needs a sleep.
//
// # A test over two members
//
//	synctest.Test(t, func(t *testing.T) {
//		cluster := coordinationtest.NewCluster()
//		clock := coordination.NewManualClock(0)
//		node1, node2 := cluster.Transport("node-1"), cluster.Transport("node-2")
//
//		holder, err := coordination.AcquireLeadership(ctx, node1, role, id1, coordination.WithClock(clock))
//		// ... start AcquireLeadership for node2 on a goroutine; it waits.
//		node1.Cut() // node-1 loses the network and stops renewing
//		// ... synctest.Wait and clock.Advance up to the deadline of the
//		// lease: node-2 takes the role there, and not a millisecond before.
//		node1.Heal()
//		// holder's next renewal fails with an error that wraps
//		// coordination.ErrFenced, and holder.Done() closes.
//	})
//
// # The conformance suite
//
// [TestTransport] checks that:
//   - AcquireEpoch mints a token that DescribeEpoch then reports, and a
//     mint of another transport fences it: the coordinator reports the new
//     token, and the old one is no longer authoritative (authority is
//     equality, never an order of tokens);
//   - DescribeEpoch of a role that nobody took reports false and no error;
//   - Append appends registrations in offset order, a nil value appends a
//     tombstone, and ReadPartition returns the records oldest first, at
//     least the newest record of each key (a reader may return the log as
//     compaction leaves it);
//   - Append refuses a lease key: a lease outside a transaction under the
//     role's epoch would let an unfenced writer fake a lease;
//   - WriteLease under the newest token writes, under a fenced token fails
//     with an error that wraps [coordination.ErrFenced] and writes nothing,
//     and with the key of another role than the token's is refused and
//     writes nothing;
//
// and for a [coordination.ExtendedTransport], every method of it:
//   - ReadPartitionFrom returns the records from an offset on and the next
//     offset to read;
//   - ReadRolesFrom returns the records of the roles asked for and no
//     other, which fold to the state that ReadPartition folds to, whether a
//     WatchRoles subscription held the role before its records landed or
//     not;
//   - WriteGuarded under the newest token writes, under a fenced token
//     fails with ErrFenced, and a record for the state topic is refused;
//   - LeaseConfig is zero (no policy) or a policy NewLeaseConfig accepts;
//   - CheckStateTopic passes the suite's topic and refuses it with
//     ErrMisconfigured under a partition count it does not have (7919);
//   - WriteTombstones writes its tombstones in order under the newest
//     token, and nothing under a fenced one (ErrFenced);
//   - StableOffsets reports nothing before a read of the partition, and
//     after one a last stable offset past the record read, at most the high
//     watermark; TopicIncarnation is 0 for a topic not created again;
//   - Minted knows the transport's own mint and not another's, Fenced a
//     token whose write was refused after a rival's mint;
//   - LateMint reports nothing of a token the transport never minted, nor
//     of one its AcquireEpoch returned, and AcquireEpochUnless from the
//     coordinator's token mints a newer one;
//   - AcquireEpochUnless from a token that a rival minted over either
//     mints over the rival or fails with ErrFenced and mints nothing; with
//     [ConformanceTarget.StallNextMint] (a mint that must retry) it must
//     fail with ErrFenced, the rival's token stays the coordinator's, and
//     from the rival's token it mints;
//   - with [ConformanceTarget.LoseNextMintReply], an AcquireEpoch whose
//     reply is lost fails, and LateMint of its transport reports the token
//     that the coordinator then holds as minted, another transport's not;
//   - WatchPartition wakes after another transport's Append and WriteLease
//     to the partition, WatchRoles after a registration and a lease of its
//     role, and stopped subscriptions leave no goroutine behind.
//
// The package's own tests run the suite over broken adapters (watches that
// never fire or leak a goroutine; a LateMint that reports nothing; an
// AcquireEpochUnless that is AcquireEpoch) and expect it to fail them.
//
// # What the model leaves out
//
// Topics need no creation and have any number of partitions (unless
// [Cluster.SetTopicPartitions] gives one a count, which CheckStateTopic
// then checks). A record becomes visible when the call that writes it
// returns, so no reader sees an open transaction unless
// [Cluster.OpenTransaction] holds one. Retention never deletes a record, and
// [Cluster.Compact] cleans the whole log at once, as if the cleaner ran with
// delete.retention.ms=0 and no active segment.
package coordinationtest
