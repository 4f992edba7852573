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
// parked: four keyed series a key, the most a key can have. The response
// goes to a writer that counts and drops it, as a server streams it to
// its connection. The docs report its numbers; it must stay under 50ms.
func BenchmarkScrape10000Keys(b *testing.B) {
	sup := parkedSupervisor(b, 10000)
	reg := prometheus.NewRegistry()
	reg.MustRegister(promcrashloop.NewCollector(sup))
	h := &promcrashloop.Handler{Supervisor: sup, Gatherer: reg}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	w := &countingWriter{header: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		w.code, w.n = http.StatusOK, 0
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK || w.n < 10000*4*40 {
			b.Fatalf("status %d, %d bytes", w.code, w.n)
		}
	}
	b.ReportMetric(float64(w.n), "bytes/scrape")
}

// countingWriter is an http.ResponseWriter that keeps the status and the
// number of bytes written, and drops the bytes.
type countingWriter struct {
	header http.Header
	code   int
	n      int
}

func (w *countingWriter) Header() http.Header         { return w.header }
func (w *countingWriter) WriteHeader(code int)        { w.code = code }
func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
