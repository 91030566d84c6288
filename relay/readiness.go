package relay

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
)

// Readiness is whether the relay is connected to both ends and
// publishing, or ready to: a session holds the pipeline, the last check
// of Postgres succeeded (or has not run), and the broker has no problem
// (brokerhealth.go). /readyz and the pgoutbox_ready gauge answer from it;
// sessions, the monitor and the row path report to it.
type Readiness struct {
	session atomic.Value // Mode of the running session, "" between sessions
	dbErr   atomic.Pointer[error]
	broker  *brokerHealth
}

// newReadiness is the readiness of a relay that publishes to broker
// (Opener.Name: "kafka", "nats-jetstream").
func newReadiness(broker string) *Readiness {
	r := &Readiness{broker: newBrokerHealth(broker)}
	r.session.Store(Mode(""))
	return r
}

// Ready tells whether the relay is connected to both ends and publishing,
// or ready to. The error says what is missing, with the topic and event
// where a record fails, named by the broker it is the problem of.
func (r *Readiness) Ready() error {
	if mode, _ := r.session.Load().(Mode); mode == "" {
		return errors.New("no session: connecting, backing off, or waiting for the pipeline lock")
	}
	if e := r.dbErr.Load(); e != nil && *e != nil {
		return fmt.Errorf("postgres: %w", *e)
	}
	if err := r.broker.err(); err != nil {
		return fmt.Errorf("%s: %w", r.broker.name, err)
	}
	return nil
}

// up marks a session of mode holding the pipeline; the returned function
// marks it gone.
func (r *Readiness) up(mode Mode) (down func()) {
	r.session.Store(mode)
	return func() { r.session.Store(Mode("")) }
}

// checked records the last check of Postgres (nil: it answered).
func (r *Readiness) checked(err error) { r.dbErr.Store(&err) }

// Handler serves /healthz (200 while the process serves) and /readyz (200
// when Ready, 503 with the reason otherwise).
func (r *Readiness) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := r.Ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}
