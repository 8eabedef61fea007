package coordination

import "context"

// This file holds how the loops (the campaign, TryAcquire, Observe,
// DescribeRoleState) pick the incremental read of a transport: the reads
// of their own roles when it implements [RoleFollower], so that its
// memory holds those roles' records only, and otherwise the whole
// partition of a [PartitionFollower]. The loops call the PartitionFollower
// that followerOf returns, whichever it is.

// followerOf returns the incremental read of the roles on each partition
// of roles, over transport: a [RoleFollower] scoped to them, or the
// transport's [PartitionFollower], or nil for a transport of neither.
func followerOf(transport any, roles map[TopicPartition][]Role) PartitionFollower {
	if follower, ok := transport.(RoleFollower); ok {
		return scopedFollower{follower: follower, roles: roles}
	}
	follower, _ := transport.(PartitionFollower)
	return follower
}

// followerOfRole is followerOf for one role on its partition.
func followerOfRole(transport any, partition TopicPartition, role Role) PartitionFollower {
	return followerOf(transport, map[TopicPartition][]Role{partition: {role}})
}

// scopedFollower reads, of each partition, the records of its roles only.
type scopedFollower struct {
	follower RoleFollower
	roles    map[TopicPartition][]Role
}

func (s scopedFollower) ReadPartitionFrom(ctx context.Context, partition TopicPartition, from int64) ([]StateRecord, int64, error) {
	return s.follower.ReadRolesFrom(ctx, partition, s.roles[partition], from)
}

func (s scopedFollower) WatchPartition(partition TopicPartition) (<-chan struct{}, func()) {
	return s.follower.WatchRoles(partition, s.roles[partition]...)
}
