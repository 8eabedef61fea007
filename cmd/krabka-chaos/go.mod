module github.com/krabka-io/krabka-streams-go/cmd/krabka-chaos

go 1.26.0

replace github.com/krabka-io/krabka-streams-go => ../..

replace github.com/krabka-io/krabka-streams-go/internal/chaos => ../../internal/chaos

require (
	github.com/krabka-io/krabka-streams-go v0.0.0-00010101000000-000000000000
	github.com/krabka-io/krabka-streams-go/internal/chaos v0.0.0-00010101000000-000000000000
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go v1.22.3 // indirect
	github.com/twmb/franz-go/pkg/kadm v1.20.0 // indirect
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
)
