package coordination

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// StateTopic is the compacted internal topic that holds the coordination
// state of a cluster. Every record of one role goes to one partition, so the
// records of a role carry a total order. See [RolePartition].
//
// The topic needs cleanup.policy=compact. A client writes it with acks=all,
// and an operator should set min.insync.replicas to at least 2. The claim
// "durable in a quorum before the dispatch" rests on that topic
// configuration, and not on this package.
const StateTopic = "__coordination_state"

// DefaultPartitions is the partition count that this package assumes for
// [StateTopic]. Pass the real count of the cluster with [WithPartitions] when
// an operator created the topic with another count.
const DefaultPartitions = 16

// TopicPartition identifies one partition of one topic. This package
// declares its own copy, because it depends on no other package of this
// library.
type TopicPartition struct {
	// Topic is the topic name.
	Topic string

	// Partition is the partition number, from 0.
	Partition int
}

// String writes the topic-partition form that Kafka's tools print, such as
// "__coordination_state-12".
func (tp TopicPartition) String() string {
	// strconv, not fmt: a handover names the partition in the op of each
	// transaction (kafka_write.go), and fmt costs microseconds there.
	return tp.Topic + "-" + strconv.Itoa(tp.Partition)
}

// RolePartition returns the partition of [StateTopic] that holds every record
// of role. It rejects a partition count below one. The zero [Role] gets the
// partition of the empty name, as the specification's rule gives it; no
// call of this package writes a record for it.
//
// The rule is Kafka's own key partitioning: murmur2 of the role name in
// UTF-8, masked with Utils.toPositive, and then the remainder of partitions.
// The mask clears the sign bit. It is not an absolute value, and the two
// differ for every negative hash. krabka-client-rs and krabka-streams-java
// write the same topic, so they compute the same rule. A change here needs
// the same change in the two ports.
//
// Both writers of a role pin the partition with this rule. The pin is a
// correctness requirement and not a preference. Kafka's default partitioner
// hashes the record key. The registration key of a role and the lease key of
// the same role differ, because the registration key names a member and the
// lease key does not. A partitioner that reads the key puts the two kinds in
// two partitions, and the total order that the succession rules rank on is
// gone.
func RolePartition(role Role, partitions int) (int, error) {
	p, err := rolePartition32(role, partitions)
	return int(p), err
}

// rolePartition32 is [RolePartition] as the int32 of the wire's partition
// field, 0 to partitions-1.
func rolePartition32(role Role, partitions int) (int32, error) {
	if partitions < 1 {
		return 0, fmt.Errorf("coordination: invalid partition count %d: want at least 1", partitions)
	}
	return toPositive(murmur2([]byte(role.name))) % int32Of(partitions), nil
}

// int32Of narrows a partition count (at least 1: RolePartition checks);
// Kafka caps a topic far below 2^31, and WithPartitions refuses more.
func int32Of(n int) int32 {
	return int32(min(max(n, 1), math.MaxInt32)) //nolint:gosec // clamped to 1..MaxInt32 on this line
}

// toPositive is Kafka's Utils.toPositive: it clears the sign bit.
func toPositive(n int32) int32 { return n & 0x7fffffff }

// murmur2 is Kafka's Utils.murmur2, the 32-bit MurmurHash2 with seed
// 0x9747b28c that the default partitioner applies to a record key.
func murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length) //nolint:gosec // Java's int length; a role name is at most 249 bytes
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h) //nolint:gosec // Java's int: the same 32 bits, signed
}
