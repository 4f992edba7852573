package promcrashloop

import (
	"encoding/json"
	"net/http"

	"github.com/crashloopguard/crashloop"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the read-only endpoints of a supervising program:
//
//   - /metrics: the series of Gatherer, in the format the scraper asks for
//     (OpenMetrics when its Accept header asks for
//     application/openmetrics-text, else Prometheus text or protobuf; a
//     series the Gatherer fails on is left out, so that one bad series
//     does not hide every alert);
//   - /status: Supervisor.Status as JSON ({"keys": ..., "fleet": ...}, as
//     crashloop.Status marshals), plus "info" when Info returns non-nil;
//   - /healthz: 200 "ok" while the program serves. It does not turn
//     unhealthy when a key parks: a liveness probe that restarted the
//     program would undo the park.
//
// Only GET and HEAD are served; any other method gets 405 with an Allow
// header, and any other path 404. No endpoint changes any state. Each
// request reads the Supervisor anew, so a response is never stale.
//
// Set the fields before serving and do not change them after. A Handler is
// safe for concurrent use. The zero value serves the default registry's
// series and an empty status.
type Handler struct {
	// Supervisor is the supervisor /status reports. Nil: a status with no
	// keys.
	Supervisor *crashloop.Supervisor
	// Gatherer is what /metrics serves. Nil: prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Info, if set, is called at each /status request, and what it returns
	// is the document's "info" member (omitted when nil). It is for what
	// the program knows beside the Supervisor, such as the child's last
	// sd_notify STATUS= text; it must be safe for concurrent use and return
	// a value encoding/json can marshal (an error is a 500).
	Info func() any
}

// statusDoc is the /status document: the Status's members, then info.
type statusDoc struct {
	crashloop.Status
	Info any `json:"info,omitempty"`
}

// ServeHTTP serves one request to /metrics, /status or /healthz.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var serve http.HandlerFunc
	switch r.URL.Path {
	case "/metrics":
		g := h.Gatherer
		if g == nil {
			g = prometheus.DefaultGatherer
		}
		serve = promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, EnableOpenMetrics: true}).ServeHTTP
	case "/status":
		serve = h.status
	case "/healthz":
		serve = func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write([]byte("ok\n"))
		}
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "read-only endpoint: use GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	serve(w, r)
}

// status writes the /status document.
func (h *Handler) status(w http.ResponseWriter, r *http.Request) {
	doc := statusDoc{Status: crashloop.Status{Keys: map[string]crashloop.KeyStatus{}}}
	if h.Supervisor != nil {
		doc.Status = h.Supervisor.Status(r.Context()) // a shared ledger is asked no longer than the request lasts
		if r.Context().Err() != nil {
			return // the client is gone
		}
	}
	if h.Info != nil {
		doc.Info = h.Info()
	}
	body, err := json.Marshal(doc)
	if err != nil {
		http.Error(w, "status: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(body, '\n'))
}
