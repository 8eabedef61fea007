// Package bridge carries the few unexported functions of package
// coordination that its subpackages (coordination/device) need, without
// exporting them from coordination: coordination sets them in an init
// function, so they are set once a subpackage that imports coordination
// runs. It imports nothing of the module.
package bridge

// KafkaError renders an error of kafkawire as an error of coordination,
// with its sentinel ([coordination.ErrNotAuthorized], ...): the one
// renderer of kafka_errors.go. coordination sets it.
var KafkaError func(error) error
