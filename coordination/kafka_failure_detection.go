package coordination

import (
	"context"
	"log/slog"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination/internal/kafkawire"
)

// This file holds the lease's side of failure detection over Kafka: the
// shortest lease that rides out the loss of one broker, and the warning of
// CheckStateTopic about a shorter one. The waits of the clients after a
// broker fault, and why a lease must outlast broker.session.timeout.ms
// plus a renew interval plus 2 s, are in kafkawire's
// failure_detection.go.

// MinLeaseForFailureDetection returns the shortest lease duration that
// rides out the loss of one broker without a leadership change, for a
// cluster whose controller fences a silent broker after sessionTimeout
// (its broker.session.timeout.ms; Kafka's default is 9 s) and a holder that
// renews every renewInterval: sessionTimeout + renewInterval + 2 s, the 2 s
// covering the election of new leaders, the client's metadata refresh and
// one retry. A shorter lease stays safe (the broker still fences a deposed
// holder), but a broker fault then costs a failover.
// [KafkaTransport.CheckStateTopic] logs a warning when the lease is
// shorter. It is a pure function, safe for concurrent use.
func MinLeaseForFailureDetection(sessionTimeout, renewInterval time.Duration) time.Duration {
	return sessionTimeout + renewInterval + kafkawire.BrokerRecoveryAllowance
}

// warnShortLease reads broker.session.timeout.ms from the broker with id
// broker (DescribeConfigs on the BROKER resource, which needs
// DESCRIBE_CONFIGS on the cluster) and logs a warning when the lease of s
// is shorter than [MinLeaseForFailureDetection] allows. A refused or failed
// read is logged at debug level: the check is advice, and a member may lack
// the ACL without harm.
func (t *KafkaTransport) warnShortLease(ctx context.Context, s *settings, broker int32) {
	sessionTimeout, source, err := t.wire.SessionTimeout(ctx, broker)
	if err != nil {
		s.logger.Debug("coordination: could not read the cluster's broker.session.timeout.ms to check the lease against it",
			slog.Any("error", err))
		return
	}
	least := MinLeaseForFailureDetection(sessionTimeout, s.lease.renewInterval)
	if s.lease.duration >= least {
		return
	}
	s.logger.Warn("coordination: the lease is shorter than the cluster needs to notice a dead broker and move its partitions, "+
		"so every broker fault will cost a leadership change; pick a lease of at least broker.session.timeout.ms + renew interval + 2s, "+
		"or lower broker.session.timeout.ms on the controllers",
		slog.Duration("lease", s.lease.duration), slog.Duration("renew_interval", s.lease.renewInterval),
		slog.Duration("broker_session_timeout", sessionTimeout), slog.String("broker_session_timeout_source", source),
		slog.Duration("shortest_lease", least))
}
