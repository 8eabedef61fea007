module github.com/krabka-io/krabka-streams-go

go 1.26
