-- crashloop's decisions on Redis: each call is one atomic step on the keys of
-- one guard, with the semantics of the in-memory guards of the library
-- (budget.go, chain.go, guard.go, fleet.go), which the conformance tests hold
-- it to.
--
-- Call: KEYS as each operation says (all under the deployment's hash tag
-- {prefix}, so a call is legal on Redis Cluster); ARGV[1] the operation,
-- ARGV[2] the time of the call in integer microseconds since the Unix epoch,
-- or "" for the server's clock (TIME; Redis 7 replicates scripts by their
-- effects, so reading the clock is allowed), ARGV[3] the grace in
-- microseconds that every TTL adds to the span its key must outlive; then the
-- operation's own arguments from ARGV[4] on.
--
-- Numbers: Lua numbers are doubles, exact for integers below 2^53 (285 years
-- in microseconds). Times and spans are integers; they are never concatenated
-- into strings (Lua would format them with 14 digits): redis.call formats a
-- number argument exactly.
--
-- Time: a key's hash keeps in field t the latest time a call on it used; a
-- time earlier than that is read as that later one, so the time of a key never
-- runs backwards (the library's rule). Windows hold these times, oldest first,
-- in a list.
--
-- Expiry: every key expires on its own once idle: a window's list span+grace
-- after its newest entry, a hash span+grace after its last call. A park, a
-- needs-human mark and a tripped fleet breaker never expire (PERSIST) while
-- they stand: losing one would restart a crash loop or lose a re-arm event.

local op = ARGV[1]
local grace = tonumber(ARGV[3])
local now
if ARGV[2] == '' then
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
else
  now = tonumber(ARGV[2])
end

local HOUR = 3600000000 -- the fleet's rolling hour, in microseconds

-- at returns the time a call on hash h uses: now, or the latest time kept in
-- h if that is later; it keeps the result as the latest.
local function at(h)
  local last = tonumber(redis.call('HGET', h, 't'))
  if last and last >= now then
    return last
  end
  redis.call('HSET', h, 't', now)
  return now
end

-- prune drops from window w the entries older than span at t: an entry
-- counts while its age is at most span.
local function prune(w, t, span)
  while true do
    local v = redis.call('LINDEX', w, 0)
    if not v or t - tonumber(v) <= span then
      return
    end
    redis.call('LPOP', w)
  end
end

-- expire makes key k expire span+grace from now (server time), rounded up to
-- a millisecond.
local function expire(k, span)
  redis.call('PEXPIRE', k, math.ceil((span + grace) / 1000))
end

local ops = {}

-- RespawnBudget. KEYS: the key's hash (t; while parked: pr reason, pc cause,
-- pa attempts, ps since) and its window of respawns.
-- Results start with an outcome: 0 respawn scheduled, 1 parked by this call,
-- 2 already parked; then the time used; then the attempt (0) or the park
-- (1, 2): reason, cause, attempts, since.

local function parked(h)
  return redis.call('HMGET', h, 'pr', 'pc', 'pa', 'ps')
end

local function park(h, reason, cause, n)
  redis.call('HSET', h, 'pr', reason, 'pc', cause, 'pa', n, 'ps', now)
  redis.call('PERSIST', h)
  return {1, now, reason, cause, n, now}
end

local function was_parked(p)
  return {2, now, p[1], p[2], tonumber(p[3]), tonumber(p[4])}
end

-- ARGV: max respawns, window, cause.
function ops.budget_failed()
  local h, w = KEYS[1], KEYS[2]
  local max, win = tonumber(ARGV[4]), tonumber(ARGV[5])
  local t = at(h)
  local p = parked(h)
  if p[1] then
    return was_parked(p)
  end
  prune(w, t, win)
  local n = redis.call('LLEN', w)
  if n >= max then
    return park(h, 'respawn_budget_exhausted', ARGV[6], n)
  end
  redis.call('RPUSH', w, t)
  expire(h, win)
  expire(w, win)
  return {0, now, n + 1}
end

-- ARGV: window, reason, cause. A park decided outside the budget; an
-- already parked key keeps its first park.
function ops.budget_park()
  local h, w = KEYS[1], KEYS[2]
  local t = at(h)
  local p = parked(h)
  if p[1] then
    return was_parked(p)
  end
  prune(w, t, tonumber(ARGV[4]))
  return park(h, ARGV[5], ARGV[6], redis.call('LLEN', w))
end

-- ARGV: window. Returns the respawns in the window, then the park if any.
function ops.budget_view()
  local h, w = KEYS[1], KEYS[2]
  local win = tonumber(ARGV[4])
  local t = at(h)
  prune(w, t, win)
  local n = redis.call('LLEN', w)
  local p = parked(h)
  if not p[1] then
    expire(h, win)
    return {n}
  end
  return {n, p[1], p[2], tonumber(p[3]), tonumber(p[4])}
end

-- Returns the park if any, else nothing.
function ops.budget_spawn()
  local p = parked(KEYS[1])
  if not p[1] then
    return {}
  end
  return {p[1], p[2], tonumber(p[3]), tonumber(p[4])}
end

-- ARGV: window. Clears the park and the window (a full budget); keeps the
-- latest time. Returns 0 if not parked, else 1, the time, reason and cause.
function ops.budget_resume()
  local h, w = KEYS[1], KEYS[2]
  local p = parked(h)
  if not p[1] then
    return {0}
  end
  redis.call('HDEL', h, 'pr', 'pc', 'pa', 'ps')
  redis.call('DEL', w)
  expire(h, tonumber(ARGV[4]))
  return {1, now, p[1], p[2]}
end

-- A healthy run: clears the window of a key that is not parked.
function ops.budget_settle()
  if not redis.call('HGET', KEYS[1], 'pr') then
    redis.call('DEL', KEYS[2])
  end
  return {}
end

-- ARGV: window. Drops the key's state, parked or not; keeps the latest time.
function ops.budget_forget()
  redis.call('HDEL', KEYS[1], 'pr', 'pc', 'pa', 'ps')
  redis.call('DEL', KEYS[2])
  expire(KEYS[1], tonumber(ARGV[4]))
  return {}
end

-- ChainDetector. KEYS: the key's hash (t; ci incarnation, cl time and cn
-- count of the newest rescue; ce while marked needs-human).

-- chain returns the chain of incarnation inc ending at t.
local function chain(e, inc, t, gap)
  local n = tonumber(e[3]) or 0
  if n == 0 or e[1] ~= inc or t - tonumber(e[2]) > gap then
    return 0
  end
  return n
end

-- ARGV: max chain, reset gap, incarnation, reactive (1 or 0). Returns an
-- outcome (0 rescued, 1 marked needs-human by this call, 2 already marked),
-- the time used, the chain, and for 2 the incarnation marked.
function ops.chain_rescue()
  local h = KEYS[1]
  local max, gap, inc = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
  local t = at(h)
  local e = redis.call('HMGET', h, 'ci', 'cl', 'cn', 'ce')
  if e[4] then
    return {2, now, tonumber(e[3]), e[1]}
  end
  local n = chain(e, inc, t, gap)
  if n >= max then
    redis.call('HSET', h, 'ce', 1)
    redis.call('PERSIST', h)
    return {1, now, n}
  end
  if ARGV[7] == '1' then
    n = n + 1
  else
    n = 0
  end
  redis.call('HSET', h, 'ci', inc, 'cl', t, 'cn', n)
  expire(h, gap)
  return {0, now, n}
end

-- ARGV: reset gap, incarnation. Returns the chain ending now.
function ops.chain_view()
  local h = KEYS[1]
  local gap = tonumber(ARGV[4])
  local t = at(h)
  local e = redis.call('HMGET', h, 'ci', 'cl', 'cn', 'ce')
  if not e[4] then
    expire(h, gap)
  end
  return {chain(e, ARGV[5], t, gap)}
end

-- Returns 1 when the key is marked needs-human.
function ops.chain_marked()
  return {redis.call('HEXISTS', KEYS[1], 'ce')}
end

-- ARGV: reset gap. Forgets the chain and the mark; keeps the latest time.
function ops.chain_clear()
  redis.call('HDEL', KEYS[1], 'ci', 'cl', 'cn', 'ce')
  expire(KEYS[1], tonumber(ARGV[4]))
  return {}
end

-- RestartLoopGuard. KEYS: the guard's hash (t) and its window.

-- ARGV: max restarts, window. Returns tripped (1/0), tripped by this restart
-- (1/0), the restarts in the window, the time used.
function ops.guard_record()
  local h, w = KEYS[1], KEYS[2]
  local max, win = tonumber(ARGV[4]), tonumber(ARGV[5])
  local t = at(h)
  prune(w, t, win)
  local was = redis.call('LLEN', w) >= max
  local n = redis.call('RPUSH', w, t)
  if n > max then
    redis.call('LTRIM', w, -max, -1)
    n = max
  end
  expire(h, win)
  expire(w, win)
  local trip = n >= max
  return {trip and 1 or 0, (trip and not was) and 1 or 0, n, now}
end

-- ARGV: window. Returns the restarts in the window.
function ops.guard_view()
  local h, w = KEYS[1], KEYS[2]
  local win = tonumber(ARGV[4])
  prune(w, at(h), win)
  expire(h, win)
  return {redis.call('LLEN', w)}
end

-- Clears the window; keeps the latest time.
function ops.guard_reset()
  redis.call('DEL', KEYS[2])
  return {}
end

-- FleetSupervisionPolicy. KEYS: the fleet's hash (t; ft 1 while tripped, fs
-- time of the trip or of its latest extension, ff and fn failing and total
-- members as last noted) and its rolling hour.

local function fleet(h)
  local f = redis.call('HMGET', h, 'ft', 'fs', 'ff', 'fn')
  return {tripped = f[1] == '1', since = tonumber(f[2]) or 0, failing = tonumber(f[3]) or 0, total = tonumber(f[4]) or 0}
end

-- rearm re-arms a tripped breaker whose cooldown has ended at t (an age of
-- exactly cooldown re-arms), clearing the hour; returns 1 if it did.
local function rearm(h, w, s, t, cooldown)
  if not s.tripped or t - s.since < cooldown then
    return 0
  end
  s.tripped = false
  redis.call('HSET', h, 'ft', 0)
  redis.call('DEL', w)
  return 1
end

local function trip(h, s, t)
  s.tripped, s.since = true, t
  redis.call('HSET', h, 'ft', 1, 'fs', t)
end

-- keep makes the fleet's hash permanent while tripped (its re-arm must be
-- seen and announced), else expire an hour after its last call.
local function keep(h, s)
  if s.tripped then
    redis.call('PERSIST', h)
  else
    expire(h, HOUR)
  end
end

-- Each fleet result: tripped now (1/0), re-armed by this call (1/0), tripped
-- by this call (1/0), restarts in the hour at the trip, failing and total as
-- announced with a re-arm, the time used.

-- ARGV: restarts per hour, cooldown (rounded up to a microsecond).
function ops.fleet_restart()
  local h, w = KEYS[1], KEYS[2]
  local rph, cooldown = tonumber(ARGV[4]), tonumber(ARGV[5])
  local t = at(h)
  local s = fleet(h)
  if not s.tripped then -- armed, and this restart does not trip it
    prune(w, t, HOUR)
    if redis.call('LLEN', w) + 1 < rph then
      redis.call('RPUSH', w, t)
      expire(w, HOUR)
      expire(h, HOUR)
      return {0, 0, 0, 0, s.failing, s.total, now}
    end
  end
  local re = rearm(h, w, s, t, cooldown)
  local tripped, n = 0, 0
  if not s.tripped then
    prune(w, t, HOUR)
    n = redis.call('RPUSH', w, t)
    if n > rph then
      redis.call('LTRIM', w, -rph, -1)
      n = rph
    end
    expire(w, HOUR)
    if n >= rph then
      trip(h, s, t)
      tripped = 1
    end
  end
  keep(h, s)
  return {s.tripped and 1 or 0, re, tripped, n, s.failing, s.total, now}
end

-- ARGV: restarts per hour (unused), cooldown, trips (1 when failing and
-- total meet the trip rule, decided by the caller), failing, total (clamped
-- by the caller). A trip while tripped extends the hold.
function ops.fleet_state()
  local h, w = KEYS[1], KEYS[2]
  local t = at(h)
  local s = fleet(h)
  local re = rearm(h, w, s, t, tonumber(ARGV[5]))
  local failing, total = s.failing, s.total -- announced with the re-arm
  redis.call('HSET', h, 'ff', ARGV[7], 'fn', ARGV[8])
  local tripped, n = 0, 0
  if ARGV[6] == '1' then
    if not s.tripped then
      prune(w, t, HOUR)
      n = redis.call('LLEN', w)
      tripped = 1
    end
    trip(h, s, t)
  end
  keep(h, s)
  return {s.tripped and 1 or 0, re, tripped, n, failing, total, now}
end

-- ARGV: restarts per hour (unused), cooldown. Re-arms when due.
function ops.fleet_tripped()
  local h, w = KEYS[1], KEYS[2]
  local t = at(h)
  local s = fleet(h)
  local re = rearm(h, w, s, t, tonumber(ARGV[5]))
  keep(h, s)
  return {s.tripped and 1 or 0, re, 0, 0, s.failing, s.total, now}
end

-- ARGV: restarts per hour (unused), cooldown. Re-arms when due; returns
-- tripped, re-armed, failing, total, restarts in the hour, the time of the
-- trip (0 unless tripped), the time used.
function ops.fleet_status()
  local h, w = KEYS[1], KEYS[2]
  local t = at(h)
  local s = fleet(h)
  local re = rearm(h, w, s, t, tonumber(ARGV[5]))
  prune(w, t, HOUR)
  keep(h, s)
  local since = 0
  if s.tripped then
    since = s.since
  end
  return {s.tripped and 1 or 0, re, s.failing, s.total, redis.call('LLEN', w), since, now}
end

-- Clears the hour, the noted state and any trip; keeps the latest time.
function ops.fleet_reset()
  redis.call('DEL', KEYS[2])
  redis.call('HDEL', KEYS[1], 'ft', 'fs', 'ff', 'fn')
  expire(KEYS[1], HOUR)
  return {}
end

local f = ops[op]
if not f then
  return redis.error_reply('crashloop: unknown operation ' .. tostring(op))
end
return f()
