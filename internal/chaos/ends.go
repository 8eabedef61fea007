package chaos

import (
	"slices"
	"strings"
)

// Causes of the end of a leadership, as [EndCauses] sorts the ended and
// fenced events of the members by the text of their error.
const (
	// EndPreempted: a due renewal cancelled a guarded write that held the
	// role's producer, and the write's transaction was in flight, so the
	// transport ended the epoch's producer (ErrProducerLost).
	EndPreempted = "write preempted by the renewal, producer ended"

	// EndWriteAbandoned: a guarded write's own context ended with its
	// transaction in flight, and the transport ended the epoch's producer.
	EndWriteAbandoned = "write context ended in flight, producer ended"

	// EndRenewalAbandoned: a renewal's context ended with its transaction
	// in flight, and the transport ended the epoch's producer.
	EndRenewalAbandoned = "renewal context ended in flight, producer ended"

	// EndRenewalFailed: a renewal failed for another reason (the lease ran
	// out, a fence, a lost producer).
	EndRenewalFailed = "renewal failed"

	// EndProducerFatal: franz-go failed the producer id for good (for
	// example a failed InitProducerId after an abort).
	EndProducerFatal = "producer id failed in franz-go"

	// EndFenced: a guarded write was refused with ErrFenced: another member
	// had minted.
	EndFenced = "write fenced"

	// EndShutdown: the member stopped at the end of the run.
	EndShutdown = "shutdown"

	// EndOther: any other error.
	EndOther = "other"
)

// EndCause counts the leaderships that ended for one cause.
type EndCause struct {
	Cause string `json:"cause"`
	Count int    `json:"count"`
}

// endCause sorts the error of an ended or fenced event.
func endCause(ev Event) string {
	text := ev.Error
	switch {
	case strings.HasPrefix(text, "shutdown"):
		return EndShutdown
	case strings.Contains(text, "the renewal cancelled it") && strings.Contains(text, "did not end within"):
		return EndPreempted
	case strings.Contains(text, "renewal by member") && strings.Contains(text, "did not end within"):
		return EndRenewalAbandoned
	case strings.Contains(text, "renewal by member"):
		return EndRenewalFailed
	case strings.Contains(text, "did not end within"):
		return EndWriteAbandoned
	case strings.Contains(text, "producer ID has a fatal"):
		return EndProducerFatal
	case ev.Kind == EventFenced || strings.Contains(text, "fenced: another member holds the role"):
		return EndFenced
	}
	return EndOther
}

// measureEnds counts the ends of leaderships in the fault phase by cause.
func measureEnds(in CheckInput, r *Report) {
	counts := make(map[string]int)
	for _, ev := range in.Events {
		if (ev.Kind != EventEnded && ev.Kind != EventFenced) || ev.WallMillis < in.Config.StartMillis {
			continue
		}
		counts[endCause(ev)]++
	}
	for cause, n := range counts {
		r.EndCauses = append(r.EndCauses, EndCause{Cause: cause, Count: n})
	}
	slices.SortFunc(r.EndCauses, func(a, b EndCause) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Cause, b.Cause)
	})
}
