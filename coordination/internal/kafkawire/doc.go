// Package kafkawire is the Kafka machinery behind coordination's
// KafkaTransport: the franz-go clients of one member process, the epochs
// that InitProducerId mints and the raw transactions under them, the plain
// appends, the read_committed reader with its compacted views, topic
// admin, and the one classifier that says what a broker's or franz-go's
// error means.
//
// It speaks Kafka's own terms, with plain types: a [Partition] (topic,
// int32 partition), a [Producer] pair (int64 id, int16 epoch), a [Record]
// of key and value bytes with its offset, timestamp (ms since the Unix
// epoch) and headers. It knows nothing of roles, leases or the record
// codec: the coordination package checks what a key means before it calls
// in, converts its types at its thin layer (the kafka_*.go files), and
// renders an [*Error] for its callers by its [Class], with the public
// sentinels. kafkawire never imports coordination.
//
// # Files
//
//   - classify.go: [Classify], per request [Path], into a [Class], and the
//     predicates of the bookkeeping. The only file that names broker codes.
//   - error.go: the package's [*Error], which carries the call, the class
//     and the cause.
//   - types.go: the plain types.
//   - wire.go: [Wire], its clients and options, the version cap that keeps
//     an epoch fixed, Close.
//   - preflight.go: the table of the requests the wire sends and their
//     versions, and the reads and ACL probes of a preflight check, none
//     of which changes the cluster.
//   - versions.go: the table of every request the package sends, by API
//     key and capped version ([Requests]), and its check at connect
//     against each broker's ApiVersions ranges ([Wire.CheckVersions]).
//   - failure_detection.go: the waits of the clients after a broker fault,
//     and the cluster's broker.session.timeout.ms.
//   - epoch.go: an [Epoch] (the state of a minted pair, its sequence
//     numbers, the context of its transaction in flight, why it ended)
//     and the registry of mints.
//   - mint.go: InitProducerId, which waits for its own answer
//     (patientInitProducerID), and DescribeTransactions of an epoch; a
//     mint that resends nothing once a rival minted (rivalMinted).
//   - mint_late.go: one mint of an id at a time, and the pair of an
//     abandoned mint attempt, which the next mint takes.
//   - mint_copy.go: an InitProducerId written without an answer, which
//     may still land: no InitProducerId of the id goes until it cannot.
//   - busy.go: the resends of CONCURRENT_TRANSACTIONS.
//   - coordinator.go: the cache of transaction coordinators, their
//     lookups (those asked for together share one FindCoordinator), and
//     the requests pinned to them: which attempt got no answer in time
//     (requestTracked), and the watch of a mint that waits for its answer
//     (untilMoved).
//   - leaders.go: the cache of partition leaders of the writes.
//   - warm.go: the warm-up of a transactional id's route.
//   - transaction.go: the life of one transaction and what a failure does
//     to its epoch, and the end of an epoch after a request whose answer
//     timed out ("A request without an answer").
//   - produce.go: the produce loop: batches, leaders, sequence numbers.
//   - txn_requests.go: AddPartitionsToTxn, EndTxn and Produce, built and
//     sent.
//   - batch.go: the encoding of a transactional record batch.
//   - append.go: the plain idempotent append, and the producer that
//     replaces plain's for the appends after a fatal answer to its
//     InitProducerId.
//   - requests.go: the raw ListOffsets and Metadata requests.
//   - reader.go: the [Reader], its state and timings.
//   - lookup.go: the leader lookups of the followed partitions.
//   - fetch_loop.go: one long-polling fetch loop per leader.
//   - fetch_request.go: the Fetch request, built, sent and read.
//   - fetch_session.go: the incremental fetch session (KIP-227).
//   - view.go: the compacted [View] of a partition.
//   - selection.go: which records a view keeps: the key groups
//     ([KeyGroup]) that callers hold ([Reader.Keep]), or the whole
//     partition; a released group lingers, then leaves the view.
//   - backfill.go: the fill of a group that joins a view which passed its
//     records: one filtered walk of the log, merged in offset order, and
//     shared by the groups that join while it runs.
//   - seen.go: a Bloom filter of the groups that the log holds, so that a
//     group without a record joins a view without a walk.
//   - wake.go: the wake-ups of waiters, watchers and loops.
//   - read.go: a read served from the view.
//   - read_log.go: the walk of a whole log.
//   - topic.go: topic admin and the reads of a topic check.
//   - consumer.go: the read_committed [Consumer] of guarded topics.
//
// A new request path gets a [Path] and its rules in Classify (with a
// column in the table of classify_test.go, which says the class of every
// code on every path), a file of its own for the request, and is asked
// nowhere else what a code means.
package kafkawire
