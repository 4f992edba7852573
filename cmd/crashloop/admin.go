//go:build unix

package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/internal/errtext"
)

// endpoints adds crashloop's own endpoints to the library's read-only
// Handler (next): /readyz, and, with --admin-token-file, POST /resume.
type endpoints struct {
	next   http.Handler
	sup    *crashloop.Supervisor
	r      *runner
	waiter *parkWaiter // nil: --on-park exit
	token  *[sha256.Size]byte
	log    *slog.Logger
}

// ServeHTTP serves /readyz and /resume, and passes every other request on.
func (e *endpoints) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case req.URL.Path == "/readyz":
		e.readyz(w, req)
	case req.URL.Path == "/status":
		e.status(w, req)
	case req.URL.Path == "/resume" && e.token != nil:
		e.resume(w, req)
	default:
		e.next.ServeHTTP(w, req) // 404 for /resume without a token
	}
}

// status serves GET /status: liveDoc, the key's live status.
func (e *endpoints) status(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "read-only endpoint: use GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	st := e.sup.Status(req.Context())
	doc := liveDoc{Keys: []liveKeyDoc{}, ProgramStatus: e.r.statusText(), Health: e.r.healthNow()}
	if st.Fleet != nil {
		doc.Fleet = fleetOf(*st.Fleet)
	}
	park := e.r.parkNow()
	for _, key := range slices.Sorted(maps.Keys(st.Keys)) {
		ks := st.Keys[key]
		k := liveKeyDoc{Key: key, State: string(ks.State), Since: jsonTime(ks.Since), TotalRestarts: ks.TotalRestarts,
			LocalRestarts: ks.LocalRestarts, CanRestart: ks.CanRestart, Incarnation: ks.Incarnation, LastError: ks.LastError,
			ExitCode: ks.ExitCode, Signal: ks.Signal, StderrTail: ks.StderrTail, Cause: ks.Cause}
		if ks.Reason != "" {
			p := parkDoc{Key: key, Reason: ks.Reason, Since: jsonTime(ks.ParkedSince), LastError: ks.LastError}
			switch {
			case park != nil && park.Key == key && park.Reason == ks.Reason:
				p = *park
			case ks.ExitCode != nil || ks.Signal != "": // parked a moment ago: crashloop has not taken the park in yet
				p.setExit(errtext.Exit{ExitCode: ks.ExitCode, Signal: ks.Signal, StderrTail: ks.StderrTail})
			default:
				p.setExit(e.r.lastExit())
			}
			p.setProbe(ks.NextProbe)
			k.Park = &p
		}
		doc.Keys = append(doc.Keys, k)
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(doc); err != nil {
		e.log.Warn("GET /status: "+err.Error(), "key", e.r.key)
	}
}

// readyz answers 200 while the program runs and is healthy (it sent
// READY=1, or has run for --healthy-after), and 503 otherwise: parked,
// starting, or between two runs.
func (e *endpoints) readyz(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "read-only endpoint: use GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	switch {
	case e.waiter != nil && e.waiter.isParked():
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("parked\n"))
	case e.r.readyNow():
		w.Write([]byte("ready\n"))
	default:
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("not ready\n"))
	}
}

// resume is POST /resume with "Authorization: Bearer TOKEN": it resumes the
// parked program, which starts again at once. A missing token gets 401, a
// wrong one 403, another method 405, a program that is not parked 409. The
// token is compared in constant time and never written anywhere.
func (e *endpoints) resume(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	// The body says nothing crashloop reads: it is drained, up to its
	// limit, so that the connection can serve the next request.
	if _, err := io.Copy(io.Discard, http.MaxBytesReader(w, req.Body, maxBodySize)); err != nil {
		http.Error(w, fmt.Sprintf("the body is larger than %s; POST /resume needs none", sizeText(maxBodySize)), http.StatusRequestEntityTooLarge)
		return
	}
	scheme, given, _ := strings.Cut(req.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || given == "" { // the scheme is case-insensitive (RFC 9110)
		w.Header().Set("WWW-Authenticate", `Bearer realm="crashloop"`)
		http.Error(w, "a bearer token is required", http.StatusUnauthorized)
		return
	}
	sum := sha256.Sum256([]byte(given)) // equal lengths: the comparison tells nothing of the token's length
	if subtle.ConstantTimeCompare(sum[:], e.token[:]) != 1 {
		e.log.Warn("refused a resume over HTTP: wrong token", "key", e.r.key, "remote", req.RemoteAddr)
		http.Error(w, "wrong token", http.StatusForbidden)
		return
	}
	err := e.waiter.resumeHTTP(req.Context())
	switch {
	case errors.Is(err, crashloop.ErrNotParked):
		http.Error(w, e.r.key+" is not parked", http.StatusConflict)
		return
	case err != nil:
		http.Error(w, "resume: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	e.log.Info("resumed over HTTP", "key", e.r.key, "remote", req.RemoteAddr)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("resumed " + e.r.key + "; it starts again with a full budget\n"))
}

// readToken reads --admin-token-file: the token is the file's content
// without surrounding white space. Errors name the file, never its content.
func readToken(path string) (*[sha256.Size]byte, error) {
	data, err := readLimited(path, maxTokenSize)
	if err != nil {
		return nil, usagef("--admin-token-file %s: %v", path, err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return nil, usagef("--admin-token-file %s: the file is empty", path)
	}
	sum := sha256.Sum256([]byte(token))
	return &sum, nil
}
