// Package coordination elects one leader per role, and it proves that
// leadership on every guarded write.
//
// A control plane that dispatches commands to external devices needs two
// properties from its log. A command is durable in a quorum before the
// dispatch, and a deposed leader cannot dispatch at all. The second property
// is the hard one. A leader that loses its lease does not know that it lost
// the lease, so it cannot fence itself. Something outside the leader must
// refuse its writes.
//
// # The epoch is the safety mechanism and the lease is not
//
// The leadership epoch is the producer epoch that Kafka's transaction
// coordinator mints for the transactional id of a role. That one decision
// supplies every property this package promises: the quorum mints the value,
// a new mint fences every older producer of the role,
// and the broker refuses a fenced producer's writes without asking any clock.
//
// The lease adds no safety of its own. It is a liveness and anti-flap
// device. It tells a standby when to stop waiting for a quiet holder. A wrong
// lease makes a failover early or late. A wrong lease never makes two writers
// authoritative. Read that inversion against a hand-rolled design, where the
// lease deadline decides who may write. This package never asks the lease
// that question.
//
// # The fencing token is a pair
//
// The producer epoch is an int16 and it wraps. Kafka handles the exhaustion
// with a fresh producer id and an epoch of zero. An implementation that
// compares the epoch alone accepts a stale writer after about 32000
// leadership changes. [FencingToken] holds the pair, and
// [FencingToken.Compare] reads the producer id first. See [NoEpoch] for the
// token of a role that no member has taken.
//
// Authority is equality with the pair that the coordinator holds now
// ([LeadershipStatus.Authoritative]), never an order: each broker
// allocates producer ids from a block of its own, so after the role's
// coordinator moved a new leader was seen with 2:0 after the deposed
// 1001:32766. Order leaderships by the commit order of their records.
//
// # Rank comes from the log
//
// A candidate appends a registration record to [StateTopic]. The offset of
// that record in the partition is the join sequence of the candidate. Log
// compaction keeps the offset of every record it retains, so a reader that
// walks the partition in offset order sees the registrations in registration
// order. [BuildRoleState] folds that walk into a [RoleState], and the roster
// it builds is in offset order.
//
// A recovered node registers again. The new record takes a higher offset, so
// the node lands at the tail of the roster and takes the last rank. That is
// the no-failback rule, and it needs no counter and no coordinator. A rank
// from a configuration file would put the recovered node at the front, and
// the node would then preempt the member that replaced it. The cluster would
// pay for a second failover that it does not need.
//
// # Roster liveness, an option: a dead standby's rank lapses
//
// A standby that waits writes nothing else to the log, so a SIGKILLed
// standby keeps its rank for ever, and every failover after it waits one
// stagger for it. Members whose ids change on every restart (a Kubernetes
// Deployment's pod names) leave such dead registrations ahead of the live
// standbys, one per restart. A refresh of the registration cannot help: the
// new record takes a higher offset and moves the member to the tail.
//
// [WithHeartbeatInterval] switches heartbeats on (they are off by default,
// see "Extensions and errata"). A waiting member then writes a [Heartbeat]
// on a key of its own ([KindHeartbeat]) right after its registration and
// every interval; the registration record never moves, so neither does the
// rank. The fold takes the newest heartbeat after the registration as the
// member's [RosterEntry.LastSeen], and [RoleState.RankAt] and [Evaluate]
// leave out a standby whose heartbeats stopped for [LeaseConfig.RosterLapse],
// three heartbeat intervals: the members behind it move up, in their offset
// order. An entry that never heartbeated never lapses, so a member of
// another port or of an older release keeps the specification's rank. The
// holder never lapses; its lease is its sign of life.
//
// No failback holds. A member whose own rank lapsed gets
// [ActionNotRegistered] from [Evaluate] and registers again, so it comes
// back at the tail, as a recovered member does. Rank decides only who
// challenges an expired lease first, so a lapse never deposes a live
// holder. Two members can disagree about a lapse only when their clocks
// differ by about two heartbeat intervals, or when a heartbeat of a stalled
// member lands at the edge of its lapse; both may then challenge as rank 0.
// InitProducerId is atomic, so a lapse costs an epoch at worst, never a
// second writer.
//
// The choice for members with changing ids: keep the ids stable (a
// StatefulSet's ordinal names, or a name stored on a volume), so that a
// restart re-registers the same key and leaves nothing behind; or switch
// heartbeats on, once every reader of the topic decodes kind 2 (a Go reader
// of a release whose package doc names [KindHeartbeat]; a port, such as
// krabka-client-rs or krabka-streams-java, only once its DecodeKey accepts
// kind 2, which this repository cannot check), so that a dead id lapses
// after three intervals; or
// keep the specification's topic and accept one stagger per dead
// registration ahead of the live standbys (a clean exit writes the
// registration's tombstone; a crash leaves it).
//
// # The stagger is an optimisation
//
// A challenger of rank n waits n challenge staggers past the deadline of the
// lease. This saves epoch churn, and it does nothing else. InitProducerId is
// atomic at the coordinator, so a simultaneous challenge by every standby
// still leaves exactly one member with the newest epoch. The losers keep an
// older epoch, and each one learns that it lost on its first guarded write.
// Set the stagger to make that outcome rare. Do not set it to make the
// outcome safe, because the outcome is already safe.
//
// # This package pins no Kafka client
//
// The core of this package reaches a broker through the small interfaces in
// [Transport]: a caller can write an adapter over another client, such as
// confluent-kafka-go, and it is the same boundary that the columnar group
// runner draws. [KafkaTransport], the adapter over franz-go, caps request
// versions so that the epoch does not move, routes each role's requests to
// its transaction coordinator, and bounds every call past its context. That
// machinery lives in an internal package, split by concept (transactions,
// reads, the coordinator cache, failure detection), with one classifier
// that says what each broker error means on each request path. The files
// named kafka_*.go are the thin layer of [KafkaTransport] over it, and they
// are the only files of this package that reach a Kafka client. Everything
// else is here: the record codec, the roster and the rank logic, the
// challenge timing, the lease clock, the renewal loop, [AcquireLeadership],
// [DescribeLeadership], [Elector], [TryAcquire] and [Observe]. The device
// side, the Gate that admits the coordinator's token only and the
// KafkaCommandReader of a guarded topic, is package coordination/device.
// Package coordinationtest holds an in-memory
// transport, with fault injection, for tests driven by a [ManualClock].
// The campaign's decisions are pure rules beside [Evaluate]; the loop only
// carries out the step they return. docs/layout.md in the repository maps
// every file to its concept, and says where a new rule or a new request
// path goes.
//
// # The transport contract
//
// A transport is the specification's four interfaces ([Transport]), and
// may add one extension contract, [ExtendedTransport], whole. The loops
// probe a value for it once, when a campaign ([AcquireLeadership],
// [TryAcquire]), an observer ([Observe], [ObserveAll]) or a
// [DescribeRoleState] starts; a [Leadership] keeps the campaign's answer.
// Nothing else asks a transport what it implements, so what a call does
// depends on one fact: the contract is there whole, or not at all. A value
// that implements part of it is a plain Transport to the package.
//
// Over a plain Transport every call gives the specification's answers: it
// polls the whole partition every poll interval, [Leadership.Resign] writes
// its tombstones with WriteLease and Append, [Leadership.Write] refuses,
// and the lease is [DefaultLeaseConfig] unless an option sets it. Over an
// [ExtendedTransport] the methods select these branches:
//   - LeaseConfig: the campaigns' default lease; an option that gives
//     another lease duration fails the call with [ErrMisconfigured]. A
//     zero LeaseConfig reports no policy.
//   - CheckStateTopic: the check of the state topic before a campaign
//     registers, and again after the topic was created again.
//   - ReadRolesFrom and WatchRoles (the campaign, TryAcquire, Observe,
//     DescribeRoleState), ReadPartitionFrom and WatchPartition
//     (ObserveAll): incremental reads that wake on each record.
//   - StableOffsets: the hold of a challenge while an open transaction
//     hides records ("Open transactions hide records").
//   - TopicIncarnation: a fold that starts over on a topic created again.
//   - Minted and Fenced: the duplicate-member watch and the no-failback
//     rule on a lease that names this member (see "Extensions and errata").
//   - LateMint and AcquireEpochUnless: the rival-mint watch
//     ([WithRivalMintWatch]).
//   - WriteTombstones: Resign's tombstones in one transaction.
//   - WriteGuarded: [Leadership.Write] and the group commit.
//
// coordinationtest.TestTransport checks every method of the contract; it
// runs over [KafkaTransport] on a broker and over the in-memory cluster of
// package coordinationtest, which implements the whole contract, and on
// which the simulation runs with every extension option on as well as off.
// An adapter over another client passes that suite; one of the four
// interfaces only passes its checks of them.
//
// # Clock assumptions
//
// The lease deadline is a wall-clock instant. The holder writes it, and a
// challenger compares it against the clock of the challenger. Skew between
// the two clocks moves the failover time by the size of the skew. Skew does
// not affect safety, for the reason the first section gives. An operator
// that needs a bound on the failover time needs a bound on the skew.
//
// Wall-clock milliseconds ([Clock.NowMillis]) go only where the
// specification puts them: the instants of the records (a lease's
// GrantedAt and Deadline, a registration's, a heartbeat's) and the inputs
// of [Evaluate] and the campaign's rules. Every wait, timeout and deadline
// of the local process (the renewals, the renew deadline of
// [WithRenewDeadline], the preemption of a guarded write, a campaign's
// heartbeat and its pause after a lost challenge) is measured from the
// grant of the lease or from its start on the clock's monotonic reading:
// [SystemClock]'s is Go's monotonic clock, [ManualClock]'s is its one
// reading. A step of the holder's wall clock (NTP, a VM restore) in either
// direction so moves a failover by at most the step, as skew does, and
// never delays nor hastens a renewal or the renew deadline. A [Clock] of
// another type that embeds neither is measured through NowMillis.
//
// # Kafka 4 and the token that must not move
//
// A cluster formatted with Kafka 4.x runs transaction.version=2 (KIP-890
// part 2), and there the coordinator bumps the producer epoch at every
// commit of an EndTxn request of version 5 or later. The token of a holder
// would then change at every renewal, and [LeadershipStatus.Authoritative]
// would stop recognising it. The coordinator picks the behaviour from the
// request version, so [KafkaTransport] caps EndTxn at version 4 and Produce
// at version 11 on its transactional producers: the token stays the minted
// pair for the whole leadership, on Kafka 3 and 4 alike. Every request of a
// transaction carries the token's own pair, so a pair that moved at the
// coordinator refuses the next request and ends the leadership with
// [ErrFenced]; the transport never adopts a pair it did not mint. Kafka
// also removes old request versions (KIP-896), so before its first
// registration or mint [KafkaTransport] checks every request it sends, at
// its capped version, against each broker's ApiVersions range, and stops
// with [ErrMisconfigured], naming the API and both ranges, on a broker that
// cannot serve one. A port over a client that cannot cap request versions must
// either run against a cluster kept at transaction.version=1, or adopt the
// pair each of its own commits returns and accept that a third party's
// [DescribeLeadership] sees the lease's token one commit behind.
//
// # The record layout
//
// The layout of the records of [StateTopic] is frozen, so that a member,
// an operator's tool or a client in another language that follows it (and
// testdata/vectors.json) reads and writes the same topic. It follows Kafka's own wire
// conventions: every integer is big-endian, every key and every value starts
// with an int16 version (0 today), and a string is an int16 byte length
// followed by that many bytes of UTF-8. Instants are int64 milliseconds since
// the Unix epoch.
//
//	key                 version int16 | kind int16 (0 registration, 1 lease;
//	                    2 heartbeat, an option) | role string | member string
//	                    (empty for a lease key)
//	registration value  version int16 | member string | registered_at int64
//	lease value         version int16 | member string | producer_id int64 |
//	                    producer_epoch int16 | granted_at int64 | deadline int64
//	heartbeat value     version int16 | member string | seen_at int64
//	                    (written only with WithHeartbeatInterval)
//
// A tombstone is a null value. The file testdata/vectors.json holds keys,
// values, malformed inputs and role partitions as hex, for a port to replay
// byte for byte. A decoder rejects a malformed record with a *[FormatError]
// and never panics; the fold of the role state skips such a record and says
// so.
//
// # The campaign in detail
//
// [AcquireLeadership] appends one registration and ranks on that record
// only: while the roster still shows an older registration of this member,
// or none, it reads again instead of appending again. A registration that
// stays invisible for two lease durations is appended once more, and logged.
// Then:
//   - It waits until [Decision.WaitUntil], or one poll interval, whichever
//     comes first. An [ExtendedTransport] wakes it on every new record of
//     its role too (WatchRoles), and it then folds only the new records of
//     its role (ReadRolesFrom).
//   - A fence on the first lease write is not a win: another member minted
//     after this one. The call goes back to waiting, and it challenges
//     again no sooner than one poll interval later, so two challengers do
//     not fence each other in turn while the winner writes its lease.
//   - A first lease write that fails for a transient reason is retried
//     under the same epoch; after [ErrProducerLost] the next challenge
//     mints again.
//   - It does not challenge on a view that it knows is incomplete: while a
//     transport's [ExtendedTransport.StableOffsets] report an open
//     transaction past the last stable offset of the partition, it holds the
//     challenge, at most for the lease duration plus Kafka's default abort
//     sweep (10 s) after the last stable offset stopped moving.
//   - A missing permission ([ErrNotAuthorized]) and a configuration the
//     cluster refuses ([ErrMisconfigured]) end the call at once, at every
//     step: at the registration too, such as INVALID_TRANSACTION_TIMEOUT or
//     CLUSTER_AUTHORIZATION_FAILED to the plain producer's InitProducerId.
//     Any other failure of the registration is retried one poll interval
//     later; a fatal answer to that InitProducerId (franz-go keeps it for
//     its client's life) makes the transport replace its producer, and the
//     registration goes again on the new one, within the same Append when
//     no record went out under the old one. Over an
//     [ExtendedTransport] the call checks the state topic first
//     (CheckStateTopic; the campaigns of one transport, topic and lease
//     share a check that passed within a minute).
//   - When the context ends, the error is the context's error itself
//     (err == context.DeadlineExceeded holds); the last error of the
//     transport, if any, is logged. The call then deregisters the member (a
//     tombstone on its registration key, under a short context of its own)
//     so that no standby ranks behind a member that left. The context
//     bounds only the wait: the leadership it returns outlives it, and ends
//     only on a fence or [Leadership.Resign].
//   - A record that does not decode is skipped and logged, once for each
//     offset: safety rests on the epoch, so a skipped record can make a
//     challenge early, never a second writer.
//   - A state topic deleted and created again under the call starts its
//     fold over ([ExtendedTransport.TopicIncarnation]; see "What this package chose
//     where the contract is silent").
//
// The lease policy is the transport's ([ExtendedTransport.LeaseConfig]; a
// [KafkaTransport]'s is its transaction timeout) unless the transport
// reports none, and then [DefaultLeaseConfig]. Options may change the
// renew interval and the stagger, not the transport's lease duration: a
// call whose options give another fails at once with [ErrMisconfigured]
// (one door for the lease; see "The transport contract").
//
// Three extensions change what the loop does, each switched on by its
// option and off by default: heartbeats ([WithHeartbeatInterval]), the
// resignation anchor ([WithResignationAnchor]), and the duplicate-member
// watch ([WithDuplicateMemberCheck]). Without them the loop writes only
// registrations and leases, and a lease or registration that names this
// member is an earlier incarnation that it fences at once.
//
// With [WithDuplicateMemberCheck], a lease or registration that names this
// member and that this call did not write is tested before it is fenced:
//
//   - before the call writes anything, it watches what names the member
//     (decideBeforeRegister): a live lease that names it, which this
//     process did not mint, for one renew interval plus one poll interval
//     (never past the lease's deadline); else, with heartbeats on, a
//     standby registration of it whose rank has not lapsed, for one
//     heartbeat interval, one poll interval and a second. A renewal, a
//     heartbeat or another registration in that time is a live duplicate,
//     and the call returns an error that wraps [ErrDuplicateMember] with
//     nothing written; else it registers (in the crashed standby's place),
//     and a lease that stayed quiet is challenged without a second wait.
//     The watch is logged as a warning;
//   - the call asks the coordinator for the role's token (DescribeEpoch): a
//     lease whose token the coordinator no longer holds names a deposed
//     member, and this call competes as a standby; a DescribeEpoch that
//     fails is logged, and the call goes on with the next test;
//   - a lease that names this member and that this process did not mint
//     ([ExtendedTransport.Minted]) must go one renew interval plus one poll interval
//     without a renewal before the call challenges; a renewal in that time
//     is a live duplicate, and the call returns an error that wraps
//     [ErrDuplicateMember];
//   - another registration of this member that replaces this call's own is
//     a live duplicate too;
//   - a renewal, a heartbeat or a registration counts as a live duplicate
//     only when it was written after the watch first saw what names the
//     member: at or past the high watermark that the transport reported
//     then ([ExtendedTransport.StableOffsets]); the log position decides,
//     not GrantedAt or SeenAt, another process's clock. A crashed
//     incarnation's last records that an open transaction hid (a
//     read_committed read stops at the last stable offset) come to light
//     later, but lie before that mark, and are no sign of a live process.
//     Without a reported high watermark, every one counts.
//
// [TryAcquire] with [WithDuplicateMemberCheck] refuses a live lease that
// names the member when this transport did not mint its token (an earlier
// incarnation, or a second live process with this member id: wait for its
// deadline); the call then leaves its registration, which may be that
// process's too.
//
// # Guarded writes and group commit
//
// [Leadership.Write] calls that arrive while a transaction of the leadership
// is in flight wait in a queue, and the next transaction writes all of them:
// one AddPartitionsToTxn, Produce and EndTxn for the lot, the records of each
// call together and in their order, the calls in the order they queued. A
// call that finds nothing in flight starts its transaction at once and
// waits for no company. Each call returns its own outcome:
//
//   - The shared transaction commits: every call of it returns nil.
//   - The broker fences the token: every call of the transaction returns an
//     error that wraps [ErrFenced], none of their records is visible, and
//     the leadership ends; the calls still queued return an error that
//     wraps [ErrNotHeld] and the fence.
//   - The transaction's outcome is unknown, or the producer is lost (the
//     error wraps [ErrProducerLost]): every call of it returns that error,
//     which says whether the records may have committed, and the
//     leadership ends.
//   - The transaction fails without committing anything and leaves the
//     leadership alone: a record for a topic that the member may not write
//     (TOPIC_AUTHORIZATION_FAILED; the error wraps [ErrNotAuthorized]) or
//     that does not exist, a record too large, a transient broker error,
//     the end of one call's context before anything was sent. One call
//     does not fail the others: when the transaction carried more than one
//     call, each call whose context still runs is written again at once in
//     a transaction of its own, in the same order, and returns the outcome
//     of that one. A call whose context ended returns the shared
//     transaction's error. (The retry rests on the contract of
//     [ExtendedTransport.WriteGuarded]: an error that wraps none of ErrFenced,
//     ErrProducerLost and ErrOutcomeUnknown means that nothing committed.)
//   - A due renewal preempts the transaction (below): every call of it
//     returns the error that says so.
//
// A call whose context ends while it waits in the queue leaves the queue
// and returns the context's error; nothing of it is written. A transaction
// runs under the contexts of all its calls, the earliest deadline among them
// included: the first context to end ends the transaction for all of them,
// as the end of a caller's context ends its own write. Over [KafkaTransport]
// the calls then return at most 250 ms after that context ended; a
// transaction still in flight then ends in the background, and every call of
// it returns an error that wraps [ErrOutcomeUnknown]: its records may
// commit, or not. The leadership goes on, and no call of such a transaction
// is written again.
//
// A write never lets the lease lapse: a renewal that falls due while a
// transaction of writes holds the slot waits for it until one renew
// interval before the lease's deadline (the lease duration minus two renew
// intervals on the regular schedule: 10 s with the defaults), then cancels
// it, and the queued writes wait for the renewal. A renewal shares no
// transaction with guarded writes: it goes alone, ahead of the queue, so
// that a caller's record (refused, or slow to be acknowledged) never holds
// the lease back, at the cost of one transaction per renew interval. Over
// [KafkaTransport] records not yet sent are then failed and the transaction
// is aborted, so nothing of it commits and the leadership goes on, while a
// transaction already in flight ends in the background as above
// (ErrOutcomeUnknown).
//
// # The Kafka transport
//
// A [KafkaTransport] stands for one member process, and it owns three
// franz-go clients, whatever the number of roles it holds:
//
//   - one plain producer for [KafkaTransport.Append]: idempotent, acks=all,
//     no linger, and a partitioner that keeps the partition the caller
//     pinned; it also sends the admin requests. A fatal answer to its
//     InitProducerId, which franz-go keeps for the client's life, moves
//     the appends to a new producer of the same options;
//   - one transactional client that every role shares. Each epoch that
//     [KafkaTransport.AcquireEpoch] mints is a producer id and epoch of
//     transactional.id = the role name, with transaction.timeout.ms = the
//     lease duration, and the lease writes and guarded writes of the role
//     are raw AddPartitionsToTxn, Produce and EndTxn requests under that
//     pair, one transaction at a time, with the sequence numbers of the
//     epoch's partitions that the transport keeps;
//   - one read_committed reader that follows, for the life of the
//     transport, every partition that a read or a watch asked for, and
//     keeps in memory the records of the roles that its callers follow
//     there (see [KafkaTransport.WatchRoles] and "Reading the state topic
//     over Kafka").
//
// So a process that holds N roles costs the connections of three clients
// to each broker (at most two each: one for Produce or Fetch, one for the
// other requests), not three per role. franz-go's own transactional
// producer binds a client to one transactional id, which is why the
// transport does not use it. How its transactions keep the minted token
// on Kafka 4: see "Kafka 4 and the token that must not move".
//
// # Fences over Kafka
//
// Broker codes 47 INVALID_PRODUCER_EPOCH, 90 PRODUCER_FENCED and 49
// INVALID_PRODUCER_ID_MAPPING from any request of a transaction end the
// epoch: [KafkaTransport] ends its producer and never sends InitProducerId
// for it again, because a new InitProducerId can mint a new epoch for a
// deposed member. Every later write under that token returns an error that
// wraps [ErrFenced] without a request. The one refusal of the token that
// is no fence, the coordinator's own abort of a transaction that outlived
// its timeout (which bumps the epoch), ends the epoch with an error that
// says so and wraps [ErrProducerLost]. A missing WRITE on the
// TransactionalId (53 TRANSACTIONAL_ID_AUTHORIZATION_FAILED) ends the epoch
// with an error that wraps [ErrNotAuthorized]; a missing ACL on a topic
// (29 TOPIC_AUTHORIZATION_FAILED) fails the write only.
//
// A transaction that leaves the epoch in a state that only a new
// InitProducerId repairs ends the epoch too, but it is no fence, and the
// error wraps [ErrProducerLost] instead: a commit that failed with its
// outcome unknown, or a request of the epoch whose answer timed out and
// that the broker may still apply later (these wrap [ErrOutcomeUnknown]
// too: the records may be in the log), an abort that failed, a batch whose
// answer never came (the partition's next sequence number is then
// unknown), 45 OUT_OF_ORDER_SEQUENCE_NUMBER or 59 UNKNOWN_PRODUCER_ID
// (after an abort, as the Java producer does), a closed transport. The
// transport then ends the open transaction itself, with an EndTxn(abort)
// at the token's epoch, so it does not hide the partition's newer records
// until the transaction timeout.
//
// A write that fails for a transient reason (a coordinator that moved, which
// franz-go finds again; CONCURRENT_TRANSACTIONS, which the transport waits
// out; NOT_ENOUGH_REPLICAS; a leader that moved; the end of its context
// before a batch went out) aborts its transaction, so the partition's last
// stable offset moves on, and keeps the token: the next write under it may
// succeed.
//
// A write whose context ends while its transaction is in flight returns
// (at most 250 ms later) an error that wraps [ErrOutcomeUnknown], and leaves
// the transaction to end in the background, holding the token's turn: a
// batch that got no answer goes again until its leader answers, so that its
// partition's next sequence number is known, and the transaction is then
// aborted, unless its commit was on its way. The producer stays; only a
// transaction that cannot be resolved within the transaction timeout ends
// it, and the next write then gets [ErrProducerLost].
//
// # Open transactions hide records
//
// A read_committed reader stops at the last stable offset, the first offset
// of the oldest open transaction of the partition. Roles that share a
// partition therefore share its stalls: an open lease transaction of one
// role hides the newer records of every role on the partition until it
// commits or is aborted. [KafkaTransport] keeps its transactions short (one
// record for a lease, no linger), aborts a transaction that failed, and
// passes the lease duration as the transaction timeout, so the coordinator
// aborts the transaction of a holder that stalled or died within a lease
// duration plus one sweep of its abort timer, whose period is the broker
// setting transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s
// by default). Until then a standby of another role on the partition sees
// that role's lease age. [KafkaTransport.StableOffsets] tells a reader
// whether its view of a partition is incomplete, so that it can wait rather
// than challenge on it.
//
// # Reading the state topic over Kafka
//
// [KafkaTransport.ReadPartitionFrom] returns the transport's compacted view
// of a partition. The view holds the whole partition from its first call on,
// for the life of the transport: every role's newest records, about 200
// bytes of heap a record (a partition of 1 000 000 records of other roles
// holds about 200 MiB). A view that held only the records of some roles
// until then is first filled with one walk of the log, as
// [KafkaTransport.ReadPartition] walks it (one Fetch per megabyte). A member
// that waits for a role reads that role with [KafkaTransport.ReadRolesFrom]
// instead, as [AcquireLeadership] does.
//
// An incremental read costs no request while the long poll of the partition
// is current: the latest answer of its leader arrived less than half the
// lease slack ago (the lease duration of the transport minus its renew
// interval; 10 s with the default lease). The view then holds every record
// committed before that answer, and the call waits for the last stable
// offset that the answer reported. A record committed after it is on its
// way: its leader completes the long poll as soon as the commit moves the
// last stable offset, and the arrival wakes [KafkaTransport.WatchPartition].
// So the view lags a commit by the transit of one Fetch response while the
// leader answers, and by at most the freshness bound when it does not; a
// holder that renews on time still looks alive in it. When the long poll is
// not current (before the first answer, after a failed fetch, or when the
// leader went silent), the call lists the last stable offset as
// ReadPartition does (one ListOffsets request), and waits for it.
//
// The transport keeps in its view of a partition only the records of the
// roles that a [KafkaTransport.WatchRoles] subscription holds, and those of
// the roles that a read asked for, for a lease duration after the read
// (unless a caller of ReadPartitionFrom made it keep the whole partition).
// Its fetch loop still fetches every committed record of the partition, and
// drops the others as it folds them; the key decides, read up to the role
// name (the frozen layout of [EncodeKey]). So a standby of one role holds
// the records of that role, whatever the other roles of its partition
// write. A read of a role that the view did not keep from the partition's
// first fetch on walks the log first, once (read_committed Fetch requests
// from the log start to the offset the view had reached, one per megabyte
// of the partition, under ctx, on a client without a long poll), keeping the
// role's records, and merges them into the view; a record that the fetch
// loop folds meanwhile wins over the walk's older record of its key. The
// roles whose first read comes while such a walk runs share the next walk,
// and a role of which the partition held no record so far needs none (the
// transport keeps a 16 KiB filter of the roles it saw on each partition it
// follows). A read whose ctx ends during its walk returns an error that
// wraps [context.Canceled] or [context.DeadlineExceeded] and leaves the role
// unfilled: the next read walks again from the log start, so on a long log
// give the first read of a role time for the walk.
//
// # Renewals and the write slot
//
// The background renewal of a [Leadership] starts in [AcquireLeadership] and
// ends when the leadership ends or [Leadership.Resign] stops it. It is no
// goroutine of its own: one goroutine per transport and [Clock] serves the
// due renewals of every leadership over that transport on that clock, and
// runs each due renewal on a pool of at most 1024 at once, so a process
// that holds many roles does not pay a goroutine for each; that goroutine
// exits when no such leadership is left. Every write of the handle (a
// renewal, [Leadership.Write], the resignation's tombstone) takes one write
// slot, because they share the role's transactional producer; a caller
// waits for the slot no longer than its context allows. Guarded writes that
// wait for the slot together share one transaction (see "Guarded writes and
// group commit"). No write starts after Done closes.
//
// [Leadership.Resign] writes a tombstone on the lease key, then one on the
// member's registration key (and on its heartbeat key, if it wrote a
// heartbeat while it waited), so the member leaves the roster: a later
// [AcquireLeadership] of the same member joins at the tail. Over an
// [ExtendedTransport], as [KafkaTransport] is, the tombstones go in one
// transaction under the epoch and commit together, so the first standby
// folds the whole resignation at once; a registration tombstone that this
// transaction did not commit (a fence, a failure) goes again as a plain
// append. A ctx that has already ended does not stop the tombstones: Resign
// then writes them under a short context of its own (600 ms). Resign waits
// for a write in flight, such as a renewal, because the tombstone goes
// through the same producer; when its context ends first it ends the
// leadership without a tombstone, and the standbys wait for the deadline.
//
// Resign waits no longer than the deadline of the newest lease (measured on
// the monotonic clock from the lease's grant), or 600 ms when that is
// sooner, whatever its context: past the deadline a standby challenges
// without the lease tombstone, and a transaction of the epoch whose request
// got no answer (a renewal's Produce that a stuck partition leader never
// answers) holds the role's producer until the transaction timeout and
// beyond. When that bound ends the tombstone transaction, the registration
// tombstone still goes as a plain append, under 600 ms more within ctx. So
// Resign with [context.Background] returns at most about 1.7 s after the
// deadline of the newest lease: the bound, the transport's 250 ms on a
// write in flight, the append's 600 ms and its 250 ms.
//
// A background renewal attempt ends by its bound: the deadline of the lease
// it renews, and at least one renew interval. An attempt that reaches it
// with its transaction in flight returns [ErrOutcomeUnknown], and the
// renewal is retried one poll interval later: the next transaction under
// the epoch waits for the one in flight, and goes only once another node
// answers as the coordinator (section "Fences over Kafka"); otherwise the epoch
// ends. Ending the leadership at the bound instead cost a second leadership
// change when a coordinator was killed under a short lease (the renewal
// lands once the new coordinator answers; TestKafkaClusterBrokerCrash).
//
// # Planned transfer
//
// [Leadership.TransferTo] hands the role to a named member of the roster,
// with the specification's two record kinds only (the frozen layout: every
// earlier release reads them). The holder pauses its renewals (a renewal
// that takes the write slot after the pause writes nothing), takes the
// write slot for one write only, so that a renewal in flight lands before
// it, and writes one lease that names the target under the holder's own
// token: an offer. It is a live lease, so every standby of this release or an earlier
// one waits for its deadline plus its rank's stagger, and none challenges.
// The target recognises the offer (campaign_rules.go, offeredTo): a lease
// that names it, under the token that the transaction coordinator holds
// now, that it did not mint, granted after its own registration, and
// whose lease before it, under the same token, named another member (the
// holder). It mints at once (its InitProducerId fences the holder, so there
// are never two writers with authority), without waiting for a view that
// no open transaction hides (the holder stopped writing), and writes its
// own lease. The
// holder sees a lease that names the target under a newer token:
// TransferTo returns nil, the leadership ends with [ErrTransferred] (and
// [ErrNotHeld]), and the holder withdraws its registration as a
// resignation does. One leadership change, one epoch.
//
// During a transfer the holder's guarded writes ([Leadership.Write]) go on:
// the holder is the one authoritative writer until the target's
// InitProducerId, and from that instant the broker fences them, so there
// is never a moment with two writers either way; a transfer that is not
// taken then costs the writer nothing. A write fenced so ends the
// leadership with [ErrFenced] instead of ErrTransferred, and TransferTo
// still returns nil once the target's lease lands. [Leadership.Renew]
// waits for the transfer's end: its lease would write over the offer. The
// renew deadline ([WithRenewDeadline]) keeps counting from the newest
// lease during the pause, and ends the leadership, and the transfer, on
// time; so does [Leadership.Resign], at once, with its tombstone. Then
// nothing is taken back, and TransferTo returns a [*TransferError] with
// [TransferNotTaken] that wraps the leadership's end.
//
// An offer is written once and never renewed, which tells it apart from
// the lease of a second live process under the target's member id (the
// duplicate-member watch, [WithDuplicateMemberCheck]): that process's
// leases under its token all name the target, and it renews them.
//
// When the target does not take the role within the bound
// ([WithTransferTimeout]; 15 s with the defaults: max(3 × 5 s, 10 s + 2 ×
// 1 s)), or the call's context ends first, the holder writes its own lease
// again under the same token (the take-back, a renewal of its own), the
// renewals resume one renew interval after it, no epoch is used, and
// TransferTo returns a [*TransferError] with [TransferNotTaken]. A target
// that minted in the meantime fences that write, and the leadership ends
// with [ErrFenced] as any fenced leadership does. A target that is not in
// the roster ([TransferNotMember]), the holder itself ([TransferToSelf]),
// a target known dead ([TransferMemberDead]), and a second transfer while
// one runs ([TransferBusy]) fail at once, before anything is written.
// Known dead needs the heartbeat extension ([WithHeartbeatInterval]): the
// target's heartbeats stopped for the roster lapse. Without heartbeats
// nothing tells a dead standby from a live one, and a transfer to a dead
// one ends with TransferNotTaken after the bound.
//
// The offer is an ordinary lease record, so [Observe] reports it as a
// [ChangeTakeover] to the target under the holder's token, then the
// target's own lease as a [ChangeReacquired] (an [Elector]'s OnNewLeader
// sees both); a transfer that is not taken shows a ChangeTakeover back to
// the holder. [TryAcquire] of the target takes an offer as the
// specification's restart path does, and with the duplicate-member watch
// refuses it until its deadline.
//
// A target of an earlier release takes the offer as a lease of an earlier
// incarnation of itself: without the duplicate-member watch it challenges
// at once (the specification's restart path), which completes the
// transfer; with the watch, it challenges once the offer went one renew
// interval plus one poll interval without a renewal (11 s with the
// defaults), which the default bound covers (its second term). A bystander
// of any release sees a live lease and waits. docs/upgrades.md says more.
//
// # Observing roles
//
// [Observe] starts with a [ChangeState] for each role, with its whole
// state, in role-name order, once every partition it follows was read once,
// and then one [ChangeSynced]; every later change is what one record
// changed, a [ChangeExpired] when a lease's deadline passes by the
// observer's clock without a renewal, or, with heartbeats on, a
// [ChangeLapsed] when a standby that heartbeated stays unseen for
// [LeaseConfig.RosterLapse] (three heartbeat intervals) by that clock. A
// heartbeat record changes no rank and yields nothing itself; the State of
// the next change carries its [RosterEntry.LastSeen]. The reader returns the
// partition as log compaction leaves it, so two records of one key that
// land within one read show as one change (a resignation and the grant that
// follows may show as a takeover). A record that changes nothing (a
// tombstone for a member that is not in the roster) yields nothing; a
// record that does not decode is logged and skipped.
//
// An [ExtendedTransport] (WatchRoles for Observe, WatchPartition for
// ObserveAll) wakes the observer on each new record, and the
// observer reads only the new records; otherwise it reads each partition
// again every poll interval ([WithPollInterval]). Only [WithTopic],
// [WithPartitions], [WithPollInterval], [WithClock], [WithLogger] and the
// heartbeat interval change what it does. The heartbeat interval is that of
// [WithHeartbeatInterval] (or of the config of [WithLeaseConfig]); without
// one no ChangeLapsed comes. Pass the members' value, or ChangeLapsed comes
// early or late.
//
// Observe reads the log, not the transaction coordinator: a mint shows
// when its holder writes its first lease, and [DescribeLeadership] (or the
// Gate of package coordination/device) tells the coordinator's token.
//
// # What the renew deadline guarantees
//
// [WithRenewDeadline] ends a leadership on the holder's own lease clock.
// Let D be the lease duration, R the renew deadline, and G the GrantedAt of
// the newest lease record whose write the cluster confirmed to the holder
// (the holder stamps G before the write, so the record's deadline G + D is
// never later than what the standbys read). A standby challenges that lease
// no sooner than G + D by its own clock, and a lease record written later,
// confirmed or not, only moves that instant on. The holder's context ends
// at G + R by its own clock. So if, over a lease duration, the standby's
// clock reads at most S ahead of the holder's (skew plus drift), then
// between the end of the holder's context and the first mint of a standby
// that waited for the deadline lie at least D − R − S. Work that stops
// within that margin after its context ends never overlaps the work of such
// a successor. Pick R so that D − R covers S plus the time the work takes
// to stop.
//
// What it does not guarantee. A mint that deposes the holder before the
// deadline (an operator's fence, a standby that misread the lease) takes
// effect at once; the holder learns it at its next renewal, at most a renew
// interval later, and its context ends then: drain with [Leadership.Resign]
// to hand over without overlap. A process that stops altogether (a long GC
// pause, SIGSTOP, a frozen VM) between its check of the context and its
// side effect acts late, and no lease can prevent it: a device that must
// never take a deposed leader's command checks the token itself (the Gate
// of package coordination/device). Safety of the writes to Kafka never
// rests on this option: the broker fences a deposed token whatever the
// clocks say.
//
// # Evaluate's extensions
//
// [Evaluate] gives the specification's rules to a config built by
// [NewLeaseConfig] or [DefaultLeaseConfig]. Two extensions, each switched on
// in the config, change the answers:
//
//   - Heartbeats ([LeaseConfig.WithHeartbeatInterval]): a member whose
//     heartbeats stopped for [LeaseConfig.RosterLapse] counts as not
//     registered (it registers again, at the tail), and ranks count only
//     the members that have not lapsed ([RoleState.RankAt]). An entry that
//     never heartbeated never lapses. WaitUntil is then also the earliest
//     lapse, ahead of this member, that would move its rank.
//   - The resignation anchor ([LeaseConfig.WithResignationAnchor]): with
//     no lease, the anchor of rule 3 is the later of the registration
//     instant and [RoleState.LeaseClearedAt], so that after a resignation
//     rank n challenges n staggers after the tombstone.
//
// # Extensions and errata
//
// A program written from the specification alone, with its names, options
// and defaults, sees exactly the specification's answers: the same
// [Decision] for every role state and instant, the same epochs minted, the
// same records written (registrations and leases only). The suite of
// TestSpec… functions (spec_test.go, over a transport of the four
// interfaces) guards that in CI. Every extension that would change one of
// those answers is switched on by a named option, off by default:
//
//   - Heartbeats and the roster lapse: [WithHeartbeatInterval] (or
//     [LeaseConfig.WithHeartbeatInterval]). Why: a dead standby's rank
//     otherwise holds back every standby behind it by one stagger, for
//     ever. Why off: it writes a third record kind that a reader of the
//     specification (another port, an older release, a tool) rejects as a
//     [FormatError]. Switch it on only after every reader runs this release
//     or later; in a rolling upgrade, upgrade all first, then switch it on
//     member by member. Tests: TestLivenessDeadStandbyRankLapses,
//     TestRankAtSkipsLapsedStandbys, TestEvaluateRules/heartbeats.
//   - The resignation anchor: [WithResignationAnchor] (or
//     [LeaseConfig.WithResignationAnchor]). Why: without it, after a
//     resignation every standby's registration is long past, so they all
//     challenge at once and the losers use up epochs. Why off: it changes
//     rule 3 of [Evaluate]. Tests: TestLivenessStaggerHoldsAfterResign,
//     TestLivenessStaggerRank1TakesOverOneStaggerAfterResign.
//   - The duplicate-member watch: [WithDuplicateMemberCheck]. Why: two live
//     processes under one member id fence each other in turn; the watch
//     returns [ErrDuplicateMember] instead, and asks the coordinator
//     whether a lease that names the member is superseded; before the
//     call writes its registration, which would replace a live standby's,
//     it waits for a renewal of a live lease that names the member, or
//     (with heartbeats) for a heartbeat of a standby registration of it.
//     Why off: the specification fences a lease that names the member at
//     once, for one epoch; the watch makes a restart wait up to one renew
//     interval plus one poll (a standby's: one heartbeat interval, one
//     poll and a second). krabka-coord elect and run switch it on (the
//     check before the registration was the CLI's own until issue 30).
//     Tests: TestLeadershipLiveDuplicateMemberIsRefused,
//     TestLeadershipRestartedHolderTakesItsRoleBackWithTheDuplicateCheck,
//     TestLeadershipDuplicateIsRefusedBeforeItWrites,
//     TestLeadershipCrashedStandbyIsTakenOverAfterOneHeartbeat,
//     TestBeforeRegisterRules, TestTryAcquireUnderALiveHoldersMemberID.
//   - [WithRenewDeadline]: the leadership ends when no renewal was
//     confirmed within the deadline ([ErrRenewDeadline]). Why: work that
//     cannot carry the token to its target (a call to a device that reads
//     none) must stop before a standby may take over, by the holder's own
//     clock (client-go's renew deadline). Why off: the specification ends a
//     leadership on a fence or a resignation only. Tests:
//     TestRenewDeadline* (renew_deadline_test.go),
//     TestKafkaClusterRenewDeadline.
//   - The rival-mint watch: [WithRivalMintWatch]. Why: while the state
//     partition cannot take a write after a broker fault, the challengers
//     of an expired lease fence each other's first lease in turn, one epoch
//     and one leadership change each; with the watch, a challenger that
//     sees the coordinator hold a newer token than the expired lease's
//     waits one lease duration plus its stagger for that token's lease
//     (issue 18: without it, up to 12 epochs and 4 changes per broker
//     fault at lease 6 s; docs/safety.md). krabka-chaos switches it on
//     with --rival-watch. Why off: by the specification a standby challenges at its instant
//     whatever the coordinator holds, and a mint that never writes a lease
//     (an operator's fence) delays the failover by a lease duration.
//     Tests: TestCampaignRules/rival (the rows of watchRival),
//     TestElectorRivalMintWatchWaitsForTheMintsLease.
//   - The transport's lease policy: over an [ExtendedTransport] that
//     reports one ([KafkaTransport] is built with one, its transaction
//     timeout), it is the default of the campaigns in place of
//     [DefaultLeaseConfig], and an option that gives another lease
//     duration is an error at construction ([ErrMisconfigured], naming
//     both). A transport of the four interfaces keeps the specification's
//     default. Test: TestAcquireLeadershipDefaultsToTheTransportsPolicy.
//
// Additions that change no answer of the specification: [Leadership.Write],
// [TryAcquire], [Elector], [Observe], the device side (package
// coordination/device), [WithLogger], and the one extension contract of a
// transport, [ExtendedTransport]; the fields [StateRecord.Timestamp],
// [RosterEntry.LastSeen] and [RoleState.LeaseClearedAt], which are zero
// unless an extension fills them (a struct literal with field names, as go
// vet asks, is unaffected); [KindHeartbeat], which this release decodes so
// that its readers fold a topic with heartbeats; and the errors
// [ErrNotAuthorized], [ErrMisconfigured], [ErrProducerLost],
// [ErrOutcomeUnknown] and [ErrDuplicateMember], for failures the
// specification does not name.
//
// Two departures are always on, because an option could not serve them:
//
//   - [DecodeKey] decodes kind 2 ([KindHeartbeat]); the specification's
//     DecodeKey rejects it as an unknown kind, and so [BuildRoleState]
//     folds a heartbeat instead of reporting it. Why: heartbeats can be
//     switched on only after every reader decodes them, so a reader must
//     decode them before any writer writes them; a decoder takes no option.
//     A topic written with the defaults holds no such record, so a reader
//     of it sees no difference. Test: TestBuildRoleStateHeartbeats.
//   - A challenge is a bounded mint attempt: the poll interval, at least
//     500 ms, doubled after each attempt in a row that ran out, up to the
//     lease duration. When it does not land, the member reads the partition
//     again and decides again: a challenge whose reason is gone is
//     dropped, and a late mint never deposes a leader that the member did
//     not see fail (issue 9). The specification bounds the call by its
//     context only. [KafkaTransport] lets the InitProducerId of an attempt
//     that ran out run on to its answer, and its next AcquireEpoch of the
//     role takes the pair that the request minted, while the coordinator
//     still holds it, instead of minting again: the pair that the
//     specification's unbounded call would have got, so an abandoned
//     attempt costs no second epoch. Over a transport that cannot do that,
//     an attempt that ran out may have used up an epoch. Tests:
//     TestLivenessLateChallengeIsAbandoned,
//     TestCampaignMintAttemptBoundGrows,
//     TestKafkaAbandonedMintIsTakenByTheNextMint (kafkawire).
//
// Records of kind 0 that the specification's Registration describes ("it
// writes a tombstone on the same key when it leaves"): [Leadership.Resign]
// and an [AcquireLeadership] whose context ends before it wins both write
// the member's registration tombstone.
//
// Errata: where the specification is wrong or unsafe, this package departs
// from it, and says why.
//
//   - [FencingToken.Compare]: "the pair stays monotonic" is wrong on a
//     cluster. Each broker allocates producer ids from a block of its own,
//     so after the role's coordinator moved a later mint carried a smaller
//     id (2:0 after 1001:32766). Authority is equality with the
//     coordinator's pair ([LeadershipStatus.Authoritative]), never an
//     order; Compare orders tokens of one producer id. Test:
//     TestKafkaClusterBrokerCrash/CoordinatorCrashShortLease (a 3-node
//     cluster).
//   - A lease under a token that this process saw fenced: the
//     specification's restart rule would challenge at once, but the
//     successor that fenced the token has minted and not yet written its
//     lease, so the challenge would fence the successor: a failback, which
//     the no-failback rule forbids. An [ExtendedTransport] that reports the
//     token Fenced (as [KafkaTransport] does) and an [Elector] after a
//     fence compete as a standby instead. A transport of the four
//     interfaces gets the specification's answer. Test:
//     TestLivenessNoFailbackAfterAFence.
//   - [Leadership.Done] closes, and [Leadership.Err] says why, on three
//     more ends than a fence and a resignation: a producer lost without a
//     fence ([ErrProducerLost]), a request of the epoch whose outcome is
//     unknown ([ErrOutcomeUnknown] and ErrProducerLost, below) and a
//     permission refused ([ErrNotAuthorized]). No write under the token can
//     land again in any case; keeping the handle open would let the holder
//     believe it leads while its lease runs out. Tests:
//     TestKafkaLeadershipACL (a refused permission),
//     TestKafkaClusterBrokerCrash (a producer lost),
//     TestKafkaLateRenewalCommitNeverTearsAWrite (an unknown outcome).
//   - A request whose answer never came. Over [KafkaTransport] no
//     transaction begins under an epoch after a request of that epoch
//     whose outcome is unknown: an EndTxn or AddPartitionsToTxn whose
//     answer timed out at a live broker (its resend may have been answered
//     since), or a batch whose copy timed out and that its leader never
//     appended. The broker may still apply such a request later, on the
//     next transaction of the pair: a late EndTxn(commit) commits whatever
//     part of a later guarded write is in the log at that moment (Kafka's
//     own exposure under transaction version 1, KAFKA-17754, which the
//     EndTxn version cap keeps; see "Kafka 4 and the token that must not
//     move"). The epoch ends instead, and the leadership with it, at its
//     next renewal or write, with an error that wraps [ErrOutcomeUnknown]
//     and [ErrProducerLost]; the member competes again and mints a new
//     epoch, which fences every late request of the old one. The call
//     whose request went unanswered returns its own outcome, which the
//     answers that came say (a resent commit answered without error
//     committed). A commit that failed, or an abort that found no open
//     transaction after records were sent, returns an error that wraps
//     ErrOutcomeUnknown, never "nothing committed". A connection that
//     broke after such a request was written counts as no answer too:
//     Kafka applies a request that it read whole after its connection
//     closed, and a proxy may break the client's side while it still
//     delivers the request (a killed broker looks the same to the
//     client). An AddPartitionsToTxn or EndTxn whose copy went to a node
//     that has since stopped being the transaction coordinator (another
//     node answered as the coordinator) cannot land any more, so a broker
//     killed or restarted under the coordinator costs no leadership
//     change (TestKafkaClusterBrokerCrash, TestKafkaClusterRollingRestart).
//     A KIP-360 bump instead of the end would change the token that the
//     Gate and the lease carry. Tests:
//     TestKafkaLateRenewalCommitNeverTearsAWrite,
//     TestKafkaRenewalCommitOnABrokenConnectionNeverTearsAWrite, and in
//     kafkawire TestLateEndTxnNeverTearsALaterTransaction,
//     TestLostBatchEndsTheEpochWhenItsSequenceStaysUnused,
//     TestLateEndTxnAfterABrokenConnectionNeverTearsALaterTransaction and
//     TestLostBatchAfterABrokenConnectionEndsTheEpoch.
//   - At most one InitProducerId per role in flight: a mint waits for the
//     answer of its request for the read timeout plus the transaction
//     timeout, instead of sending it again after the read timeout, unless
//     the role's coordinator moved to another node meanwhile (the old one
//     can no longer apply it). A copy sent again was answered first, and
//     the first one, applied later, fenced the member's own new epoch with
//     no other member present. A caller that gives up leaves the request
//     to its answer, and the next mint of the role takes the pair. An
//     InitProducerId whose connection broke after it was written (or whose
//     answer timed out) is not sent again while a copy of it may land:
//     the next InitProducerId of the role waits until the read timeout
//     plus the lease duration have passed since (monotonic), or another
//     node answered as the coordinator, so the pair it gets is the last
//     one. A mint whose request was answered waits for nothing. KIP-360's
//     expected pair would not do: the coordinator takes the second of two
//     challengers that saw one pair for a retry and gives both one pair.
//     Tests: TestKafkaLateMintAnswerIsNoSelfFence,
//     TestKafkaLateMintAfterABrokenConnectionNeverFencesTheMember, and in
//     kafkawire TestMintWaitsForItsOwnInitProducerID,
//     TestMintAtACoordinatorThatMovedGoesAgain,
//     TestLateMintAfterABrokenConnectionNeverFencesTheMember,
//     TestMintWithoutABrokenConnectionWaitsForNoCopy and
//     TestKafkaExpectedPairMintsOnePairTwice.
//   - [NewRole] and [NewMemberID] also reject a name that is not UTF-8. The
//     role is a Kafka transactional.id, which the protocol carries as UTF-8:
//     a Java broker decodes invalid bytes to U+FFFD, so two such roles
//     would share one epoch, and a port in Java would hash another partition
//     for them. Test: TestNameBounds.
//   - A second campaign of one process for a role and member that it
//     already campaigns for or holds, over the same transport and state
//     topic ([AcquireLeadership], [TryAcquire], [Elector.Run]), returns
//     [ErrDuplicateCampaign] at once. The specification's restart rule
//     fences the lease that names the member because the record "came from
//     an earlier incarnation"; a live call of the same process is none, and
//     the two calls fenced each other about twice a second. A program
//     written from the specification that restarts a member only after its
//     earlier handle ended sees the specification's answers. Tests:
//     TestDuplicateCampaignOfOneProcessIsRefusedAtOnce,
//     TestDuplicateCampaignBesideARunningElector.
//
// # What this package chose where the contract is silent
//
//   - [Leadership.Resign] also deregisters the member (a tombstone on its
//     registration key), and so does an [AcquireLeadership] whose context
//     ends before it wins. A member that left ranks nobody behind it, and a
//     member that comes back joins at the tail, as the no-failback rule
//     wants. Over an [ExtendedTransport] ([KafkaTransport]) Resign's lease
//     and registration tombstones go in one transaction under the epoch,
//     so the first standby wakes once, on a fold that has both; the
//     records are the same keys with null values as two separate writes
//     leave.
//   - A loser of a simultaneous challenge waits one poll interval before it
//     challenges again, so two challengers never fence each other in turn
//     while the winner writes its first lease.
//   - [Leadership.Write] is the guarded write of the caller's own records,
//     through [ExtendedTransport.WriteGuarded].
//   - Over an [ExtendedTransport] a waiting member folds only new records,
//     and wakes on each one instead of at the next poll; it reads the
//     records of its own role only (ReadRolesFrom), so a transport that
//     keeps them in memory keeps those of the roles its process follows.
//   - No failback after a fence: a member whose transport saw its token
//     fenced ([ExtendedTransport.Fenced]), or an [Elector] that saw its leadership
//     fenced, does not take the role back from the lease that still names
//     it; it competes as any standby, by the rank of its new registration.
//     See "Extensions and errata".
//   - Every call returns within its context plus a small bound: a write whose
//     transaction is in flight when the context ends waits 250 ms more, then
//     returns an error that wraps [ErrOutcomeUnknown]; the transaction ends
//     in the background (aborted once every batch of it has an answer,
//     within the transaction timeout), and the epoch's producer and the
//     leadership stay; [Leadership.Resign] with a context that had
//     already ended takes 600 ms for its tombstones; [KafkaTransport.Close]
//     returns within 500 ms.
//   - A due renewal does not starve behind a slow guarded write: it waits
//     for the write until one renew interval before the lease's deadline
//     (10 s with the default lease), then cancels it (the write's error says
//     so) and renews. It waits that long because a write cancelled in
//     flight holds the epoch's turn over [KafkaTransport] until its
//     transaction ends in the background.
//   - A renewal attempt may take until the deadline of the lease it renews
//     (at least one renew interval), so a commit that is slow while the
//     role's transaction coordinator moves renews the lease instead of
//     losing the epoch's producer.
//   - [Elector]: OnStartedLeading runs on Run's goroutine. Work that
//     returns while the leadership holds ends it with a resignation, and
//     the elector campaigns again (at the tail, one poll interval later);
//     Run itself ends only when
//     its context ends (it returns nil, after the work returned and a
//     resignation under a 2 s context of its own) or on an error that no
//     retry repairs. A panic of the work resigns, calls OnStoppedLeading,
//     and panics again with the same value: a crash stays a crash, and the
//     standby takes over at once. OnStoppedLeading runs only after an
//     OnStartedLeading (unlike client-go's). OnNewLeader comes from an
//     [Observe] of the role, so it names the holder that the log shows,
//     this member included.
//   - [WithRenewDeadline] ends the leadership itself (with
//     [ErrRenewDeadline]), not only a context, so that no write of the
//     handle starts after the work was told to stop; the member then
//     competes again, and takes the role back at once when no standby
//     took it. It is off by default.
//   - [TryAcquire] deregisters a member that it refuses, as etcd's TryLock
//     deletes its key: a try leaves no standby in the roster that others
//     would rank behind.
//   - [Observe] yields a [RoleChange] per record that changes the fold,
//     an expiry by the observer's clock, and, with heartbeats on, a
//     standby's lapse; it
//     reads the log only, not the coordinator. Its first values are the state of every role and
//     [ChangeSynced], once every partition was read.
//   - The Gate of package coordination/device caches the coordinator's
//     token without a timer, asks again only for a token it has not seen,
//     remembers refused tokens, and fails closed (an error that is no
//     refusal) when it cannot ask.
//   - [GuardedRecord.Headers] are Kafka record headers, kept in order,
//     repeated keys included.
//   - A state topic deleted and created again under running members (Kafka
//     gives it a new topic id): a transport that reports it
//     ([ExtendedTransport.TopicIncarnation]; [KafkaTransport] notices within a long
//     poll and a Metadata request) makes every waiting [AcquireLeadership]
//     start its fold over from offset 0 of the new log and register again;
//     it challenges no sooner than one lease duration later, so a live
//     holder's next renewal, which writes its lease into the new log, keeps
//     it the holder. A topic created again with another partition count
//     stops the call with [ErrMisconfigured] (the check of the state topic,
//     or a read of a partition that no longer exists). Tests:
//     TestKafkaTopicRecreatedFake, TestKafkaTopicRecreatedKafka.
//   - Two applications that use one role name on one cluster, each with its
//     own state topic, share the role's transactional id, and each one's
//     challenge fences the other's holder. A member whose lease was fenced
//     asks the coordinator once (DescribeEpoch) which token fenced it; a
//     member of its own topic writes its lease under that token at once.
//     When none came by the deadline of the fenced lease (or, with
//     [WithRivalMintWatch], a rival's mint wrote none for a lease duration
//     plus the stagger), the member logs it: once is a challenger that died
//     between its mint and its lease; twice within ten lease durations ends
//     the call with a [*ForeignEpochError], which wraps [ErrMisconfigured].
//     A member that never held the role asks nothing, so the duel of two
//     applications is found by the members that it deposes. Test:
//     TestTwoApplicationsSharingARoleNameAreReported.
//   - A value that goes into a narrower field of a Kafka request is checked
//     where the request is built, with an error that names the field and
//     the limit, never wrapped: a lease above math.MaxInt32 ms
//     ([NewKafkaTransport]: the transaction timeout), a partition count
//     above math.MaxInt32 ([WithPartitions]), a replication factor outside
//     the int16 ([KafkaTransport.CreateStateTopic]), a record above 1 GiB
//     (the int32 lengths of a record batch).
package coordination
