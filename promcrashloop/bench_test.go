package promcrashloop_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/crashloopguard/crashloop/promcrashloop"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkScrape10000Keys times one whole scrape of /metrics (Status,
// gathering, text encoding) of a Supervisor that knows 10,000 keys, all
// parked: three keyed series a key, the most a key can have. The docs
// report its numbers; it must stay under 50ms.
func BenchmarkScrape10000Keys(b *testing.B) {
	sup := parkedSupervisor(b, 10000)
	reg := prometheus.NewRegistry()
	reg.MustRegister(promcrashloop.NewCollector(sup))
	h := &promcrashloop.Handler{Supervisor: sup, Gatherer: reg}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
}
