package nemesis

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// EventType says what a history line records.
type EventType string

const (
	// EventRun opens a history: the seed and the run's settings.
	EventRun EventType = "run"
	// EventPlanned is one fault of the schedule, before the run starts.
	EventPlanned EventType = "planned"
	// EventFaultStart and EventFaultEnd are a fault done and undone.
	EventFaultStart EventType = "fault-start"
	EventFaultEnd   EventType = "fault-end"
	// EventRelay is a relay's own line about its mode or its sessions
	// (switching to polling or WAL, streaming, reconnecting), read from its
	// log, with the time the relay logged it.
	EventRelay EventType = "relay"
	// EventProcess is a relay process started or exited.
	EventProcess EventType = "process"
	// EventNote is anything else worth knowing when reading a run back
	// (a stuck relay, the end of the writers).
	EventNote EventType = "note"
	// EventReport closes a history with the checker's report.
	EventReport EventType = "report"
)

// Event is one line of a history.
type Event struct {
	// T is the time since the run's start, Time the wall clock.
	T    Seconds   `json:"t"`
	Time time.Time `json:"time"`
	Type EventType `json:"type"`
	// Fault is the schedule's fault, for planned and fault events; Index
	// is its place in the schedule.
	Fault *Fault `json:"fault,omitempty"`
	Index int    `json:"index,omitempty"`
	// Relay is the relay index, for relay and process events.
	Relay *int `json:"relay,omitempty"`
	// Mode is the relay's mode after a relay event that changes it.
	Mode   Mode   `json:"mode,omitempty"`
	Msg    string `json:"msg,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Data carries the run's settings or the report.
	Data any `json:"data,omitempty"`
}

// Seconds is a duration written as seconds with a fraction.
type Seconds float64

// History is a run's history, written line by line as the run goes (JSON
// lines), so that a run that dies still leaves what it did.
type History struct {
	start time.Time
	mu    sync.Mutex
	f     *os.File
	w     *bufio.Writer
	evs   []Event
}

// NewHistory creates the history file at path; start is the run's time 0.
func NewHistory(path string, start time.Time) (*History, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("nemesis: history: %w", err)
	}
	return &History{start: start, f: f, w: bufio.NewWriter(f)}, nil
}

// Start is the run's time 0.
func (h *History) Start() time.Time { return h.start }

// Add records e, stamped now unless it carries its own time.
func (h *History) Add(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.T = Seconds(e.Time.Sub(h.start).Seconds())
	h.mu.Lock()
	defer h.mu.Unlock()
	h.evs = append(h.evs, e)
	if h.w == nil {
		return
	}
	b, err := json.Marshal(e)
	if err != nil {
		b, _ = json.Marshal(Event{T: e.T, Time: e.Time, Type: EventNote, Msg: "unencodable event", Detail: err.Error()})
	}
	h.w.Write(b)
	h.w.WriteByte('\n')
	h.w.Flush() // a killed test still leaves every line
}

// Events are the events so far, in the order they were added.
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.evs...)
}

// Close closes the file.
func (h *History) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return nil
	}
	err := h.w.Flush()
	if cerr := h.f.Close(); err == nil {
		err = cerr
	}
	h.f, h.w = nil, nil
	return err
}

// ReadHistory reads a history file back.
func ReadHistory(r io.Reader) ([]Event, error) {
	var out []Event
	dec := json.NewDecoder(r)
	for {
		var e Event
		if err := dec.Decode(&e); err == io.EOF {
			return out, nil
		} else if err != nil {
			return out, fmt.Errorf("nemesis: history line %d: %w", len(out)+1, err)
		}
		out = append(out, e)
	}
}

// Span is a fault as it was done: when it started and when it was undone.
type Span struct {
	Fault      Fault
	Start, End time.Time
}

// Spans pairs the fault-start and fault-end events of a history; a fault
// not undone ends at end.
func Spans(evs []Event, end time.Time) []Span {
	open := map[int]int{} // schedule index -> span index
	var out []Span
	for _, e := range evs {
		switch e.Type {
		case EventFaultStart:
			open[e.Index] = len(out)
			out = append(out, Span{Fault: *e.Fault, Start: e.Time, End: e.Time})
		case EventFaultEnd:
			if i, ok := open[e.Index]; ok {
				out[i].End = e.Time
				delete(open, e.Index)
			}
		}
	}
	for _, i := range open {
		out[i].End = end
	}
	return out
}
