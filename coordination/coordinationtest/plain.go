package coordinationtest

import "github.com/krabka-io/krabka-streams-go/coordination"

// Plain returns a transport that forwards the four calls of
// [coordination.Transport] to transport, and implements nothing else: it
// hides [coordination.ExtendedTransport], so the loops over it get the
// specification's behaviour.
// A test runs package coordination over it to cover the path of an adapter
// that only polls. Calls through it count, and fail, on the transport
// behind it. It is as safe for concurrent use as transport is.
func Plain(transport coordination.Transport) coordination.Transport {
	return plain{transport}
}

// plain embeds the interface, not the concrete type, so its method set is
// the four interfaces of Transport and nothing more.
type plain struct {
	coordination.Transport
}
