// Command decodestate decodes records of the state topic with the package
// coordination it was built with, for the mixed-release test
// (cmd/krabka-chaos TestMixedReleases), which builds it twice: against this
// release and against the pinned previous one.
//
// It reads JSON lines {"key": hex, "value": hex or null} on its standard
// input and writes one line per record: the [chaos.DecodedRecord] of the
// record, whose error field names a record that does not decode. It exits 2
// on input that is no such line, naming the line.
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"

	"github.com/krabka-io/krabka-streams-go/internal/chaos"
)

type input struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

func main() {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 64*1024), 16*1024*1024)
	out := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(out)
	line := 0
	for scanner.Scan() {
		line++
		var in input
		if err := json.Unmarshal(scanner.Bytes(), &in); err != nil {
			fail(line, err)
		}
		key, err := hex.DecodeString(in.Key)
		if err != nil {
			fail(line, fmt.Errorf("key: %w", err))
		}
		var value []byte
		if in.Value != nil {
			if value, err = hex.DecodeString(*in.Value); err != nil {
				fail(line, fmt.Errorf("value: %w", err))
			}
		}
		if err := encoder.Encode(chaos.DecodeStateRecord(key, value)); err != nil {
			fail(line, err)
		}
	}
	if err := scanner.Err(); err != nil {
		fail(line+1, err)
	}
	if err := out.Flush(); err != nil {
		fail(line, err)
	}
}

func fail(line int, err error) {
	fmt.Fprintf(os.Stderr, "decodestate: input line %d: %v\n", line, err)
	os.Exit(2)
}
