// Package device is the device side of fencing. A device, or the
// dispatcher in front of it, reads the commands that a leader wrote with
// coordination's Leadership.Write ([KafkaCommandReader] yields each one as
// a [Command] with the fencing token of its record batch) and acts on one
// only when [Gate.Admit] finds its token to be the token that the
// transaction coordinator holds for the role now. Only the files named
// kafka_*.go import franz-go.
//
// # Equality, not order
//
// Authority is equality with the token that the transaction coordinator
// holds for the role now, as [coordination.DescribeLeadership] reports it.
// The gate never ranks tokens: producer ids are not monotonic across
// brokers (2:0 was seen after 1001:32766 when a role's coordinator moved),
// so a test such as "newer than the last token seen" would take a deposed
// leader's token for a successor's, or the other way round.
//
// # The cache
//
// The gate caches the coordinator's token. A command under the cached
// token is admitted without a request. A token that the gate has not seen
// makes it ask the coordinator again (one DescribeTransactions over Kafka,
// bounded by the caller's context and by 5 s), and calls that arrive
// meanwhile share the answer of a request that began after they arrived.
// A token that the coordinator no longer holds is remembered as refused
// (up to 4096 of them; the gate forgets them all past that, and then asks
// again), because a superseded pair never becomes the coordinator's token
// again. So the cost is one request per leadership change and per
// unknown token, not one per command.
//
// What this gives a device that checks every command before it acts: once
// it admitted a command of a token, it refuses every command of a token
// that the coordinator held before it. A leader's commands are admitted
// until the gate sees a successor's token: the cache is not refreshed on a
// timer, and the broker already refuses a deposed leader's writes, so in
// one partition of the log no command of a deposed leader follows its
// successor's first one. A deposed leader's command that reaches the
// device out of that order (another partition, a replay, a lagging
// consumer, an RPC) after the successor's is refused.
//
// # Isolation is not authority
//
// [KafkaCommandReader] reads with read_committed isolation, so a deposed
// leader's transaction that the broker fenced, or that its coordinator
// aborted, never appears. A committed record of a leader that was deposed
// after its commit is still in the log, and a consumer that lags, replays,
// or reads several partitions sees it after the successor's records: the
// gate refuses it then.
package device
