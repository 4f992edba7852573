//go:build unix

package main

// endpointsHelp is "crashloop help endpoints".
const endpointsHelp = `--metrics-addr ADDR serves, on ADDR only:

  GET /metrics   the Prometheus series (docs/monitoring.md lists them)
  GET /status    the live status as JSON (crashloop help json), with
                 --health-cmd the health of the run under way
  GET /healthz   200 "ok" while crashloop runs; a park does not change it,
                 so that a liveness probe never undoes a park
  GET /readyz    200 "ready" while the program runs and is healthy (it sent
                 READY=1, a --health-cmd check passed, or it has run for
                 --healthy-after); 503 "parked"
                 while --on-park wait holds it parked; 503 "not ready"
                 while it starts, waits out a backoff or is stopped
  POST /resume   with --on-park wait and --admin-token-file FILE only: the
                 header "Authorization: Bearer TOKEN", TOKEN the content of
                 FILE, resumes the parked program at once. No token: 401;
                 a wrong one: 403; not parked: 409; another method: 405;
                 a body over 4 KiB: 413 (none is needed)

Every other path is 404, and every other method on GET endpoints 405.

  curl -X POST -H "Authorization: Bearer $(cat /run/secrets/crashloop-token)" http://127.0.0.1:9464/resume
`

// limitsHelp is "crashloop help limits".
const limitsHelp = `crashloop reads at most, and refuses past that, without reading further:

  --config FILE            1 MiB
  --state FILE             16 MiB
  --admin-token-file FILE  4 KiB
  the body of POST /resume 4 KiB (it needs none)
  a request's header       16 KiB

History files of replay are read line by line, in constant memory. tune
keeps a history's records, 32 bytes each, and refuses a history of more
than 4,000,000 records (after reading it).
`

// jsonHelp is "crashloop help json".
const jsonHelp = `Every JSON document crashloop writes follows one schema:

  - names are snake_case; durations are Go duration strings ("1m30s");
    times are RFC 3339 in UTC with nine fractional digits
    ("2026-01-02T03:04:05.000000000Z"); a value that is absent (no last
    error, never parked) is left out, never null or a zero time;
  - a park is one object everywhere: key, reason, since, attempts (what
    the guard that parked it counted), last_error, and exit_code, signal,
    stderr_tail, oom_killed and next_probe (--probe-after) when they are
    known;
  - counts of keys are named keys (failing_keys, total_keys).

The documents: crashloop status --json (of --state or --redis), GET
/status, crashloop replay --json, crashloop simulate --json, crashloop
plan --json, and each line of --log-format json. Their JSON Schemas are in docs/schema/ of the
repository.
`
