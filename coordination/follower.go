package coordination

import "context"

// This file holds how the loops (the campaign, TryAcquire, Observe,
// DescribeRoleState) take the incremental read of an [ExtendedTransport]:
// the reads of their own roles (ReadRolesFrom, WatchRoles), so that its
// memory holds those roles' records only. ObserveAll reads whole
// partitions (ReadPartitionFrom, WatchPartition).

// followerOf returns the incremental read of the roles on each partition
// of roles over the extensions of a transport (extensionsOf), or nil for
// a transport without them.
func followerOf(extended ExtendedTransport, roles map[TopicPartition][]Role) partitionFollower {
	if extended == nil {
		return nil
	}
	return scopedFollower{follower: extended, roles: roles}
}

// followerOfRole is followerOf for one role on its partition.
func followerOfRole(extended ExtendedTransport, partition TopicPartition, role Role) partitionFollower {
	return followerOf(extended, map[TopicPartition][]Role{partition: {role}})
}

// scopedFollower reads, of each partition, the records of its roles only.
type scopedFollower struct {
	follower ExtendedTransport
	roles    map[TopicPartition][]Role
}

func (s scopedFollower) ReadPartitionFrom(ctx context.Context, partition TopicPartition, from int64) ([]StateRecord, int64, error) {
	return s.follower.ReadRolesFrom(ctx, partition, s.roles[partition], from)
}

func (s scopedFollower) WatchPartition(partition TopicPartition) (<-chan struct{}, func()) {
	return s.follower.WatchRoles(partition, s.roles[partition]...)
}
