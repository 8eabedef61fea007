module github.com/krabka-io/krabka-streams-go/internal/chaos

go 1.26.0

replace github.com/krabka-io/krabka-streams-go => ../..

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/krabka-io/krabka-streams-go v0.0.0-00010101000000-000000000000
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kadm v1.20.0
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	go.uber.org/goleak v1.3.0 // indirect
)
