package chaos

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Action is what an [Event] of the history did.
type Action string

// The actions a history records.
const (
	ActFault Action = "fault" // a fault applied
	ActHeal  Action = "heal"  // its heal
	ActMove  Action = "move"  // replicas moved, as an orchestrator would
	ActNote  Action = "note"  // anything else worth the timeline (a failover seen)
)

// Event is one entry of the history: when, what and to what.
type Event struct {
	At     time.Time
	Action Action
	Kind   Kind // of the fault the event belongs to
	Target string
	Detail string
}

func (e Event) String() string {
	return fmt.Sprintf("%s %s %s %s %s", e.At.Format("15:04:05.000"), e.Action, e.Kind, e.Target, e.Detail)
}

// Violation is one checker's finding, with what reproduces it: the seed
// and the time into the run.
type Violation struct {
	At      time.Time
	Checker string
	Detail  string
}

// History is the run's record: every event and every violation. It is safe
// for concurrent use.
type History struct {
	// Echo, when set before the run, is told each event and violation as
	// it is recorded, so that an hour-long run can be watched (the report
	// comes only at its end).
	Echo func(format string, args ...any)

	mu         sync.Mutex
	events     []Event     // guarded by mu
	violations []Violation // guarded by mu
}

// Record appends an event.
func (h *History) Record(e Event) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
	if h.Echo != nil {
		h.Echo("%s", e)
	}
}

// Violate appends violations.
func (h *History) Violate(vs ...Violation) {
	h.mu.Lock()
	h.violations = append(h.violations, vs...)
	h.mu.Unlock()
	if h.Echo != nil {
		for _, v := range vs {
			h.Echo("VIOLATION %s %s: %s", v.At.Format("15:04:05.000"), v.Checker, v.Detail)
		}
	}
}

// Events returns a copy of the events so far.
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

// Violations returns a copy of the violations so far.
func (h *History) Violations() []Violation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.violations)
}
