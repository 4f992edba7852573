-- crashloop's decisions on Redis: each call is one atomic step on the key of
-- one guard, with the semantics of the in-memory guards of the library
-- (budget.go, chain.go, guard.go, fleet.go), which the conformance tests hold
-- it to.
--
-- Call: KEYS[1] the guard's key, and for a budget or a chain KEYS[2] the set
-- of its kind's standing marks (see list), all under the deployment's hash
-- tag {prefix} so that the call is legal on Redis Cluster; ARGV[1] the
-- operation; ARGV[2] the time of the call in integer microseconds since the
-- Unix epoch, or "" for the server's clock (TIME; Redis 7 replicates scripts
-- by their effects, so reading the clock is allowed); ARGV[3] the key's time
-- to live in milliseconds once idle (its span plus a grace, computed by the
-- caller); then the operation's own arguments from ARGV[4] on.
--
-- Numbers: Lua numbers are doubles, exact for integers below 2^53. Times are
-- kept as the decimal strings of integer microseconds, 16 characters wide
-- (zero-padded; the years 1970 to 2286), and read with tonumber; they are
-- never formatted with Lua's default 14 digits.
--
-- Time: a guard's key keeps the latest time a call on it used; a time
-- earlier than that is read as that later one, so the time of a key never
-- runs backwards (the library's rule).
--
-- Windows: a window's times, oldest first, packed 16 characters each in one
-- string, so that one read gets the whole state of a guard and one write puts
-- it back: a budget or a restart-loop guard is a string (GET, then SET with
-- PX: two commands a decision), a chain or a fleet breaker a hash (HMGET,
-- HSET, then PEXPIRE or PERSIST). A window holds at most its limit
-- (MaxRespawns, MaxRestarts, RestartsPerHour), and a call copies it: this
-- suits limits up to some thousands.
--
-- Notices: the transitions other replicas must see at once are published on
-- the channel {prefix}:events (see announce).
--
-- Expiry: every key expires on its own, ARGV[3] ms after its last call. A
-- park, a needs-human mark and a tripped fleet breaker never expire while
-- they stand (a budget written without PX, PERSIST for a hash): losing one
-- would restart a crash loop, or lose a re-arm that must be announced. The
-- sets listing parks and marks hold only such marks, and vanish when empty.

local op, ttl = ARGV[1], ARGV[3]
local now, nows
if ARGV[2] == '' then
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
  nows = string.format('%016d', now)
else
  now, nows = tonumber(ARGV[2]), ARGV[2]
  if #nows ~= 16 then
    nows = string.format('%016d', now)
  end
end
local h = KEYS[1]

-- The hot path comes first and makes no helper (a helper is a closure,
-- made afresh by every call): a failed start granted a respawn, the
-- budget_failed of a key that is not parked and whose window has room (see
-- the budget below for the layout). Everything else goes on below, where
-- budget_failed is handled in full.
if op == 'budget_failed' then
  local v = redis.call('GET', h)
  if not v or not string.find(v, '\n', 17, true) then
    local t, ts, w = now, nows, ''
    if v then
      w = string.sub(v, 17)
      local l = tonumber(string.sub(v, 1, 16))
      if l >= now then
        t, ts = l, string.sub(v, 1, 16)
      end
    end
    local span, i, n = tonumber(ARGV[4]), 1, #w
    while i <= n and t - tonumber(string.sub(w, i, i + 15)) > span do
      i = i + 16
    end
    w = string.sub(w, i)
    if #w / 16 < tonumber(ARGV[5]) then
      redis.call('SET', h, ts .. w .. ts, 'PX', ttl)
      return {0, now, #w / 16 + 1}
    end
  end
end

-- latest returns the time a call uses, as a number and as its string: now,
-- or the latest time kept (last, a string or false) if that is later.
local function latest(last)
  if last then
    local l = tonumber(last)
    if l >= now then
      return l, last
    end
  end
  return now, nows
end

-- prune returns window w without the times older than span at t: a time
-- counts while its age is at most span.
local function prune(w, t, span)
  if not w then
    return ''
  end
  local i, n = 1, #w
  while i <= n and t - tonumber(string.sub(w, i, i + 15)) > span do
    i = i + 16
  end
  if i > 1 then
    return string.sub(w, i)
  end
  return w
end

-- announce publishes a transition that other replicas must see at once (a
-- park, a resume, a needs-human mark and its clearing, a fleet trip and its
-- re-arm) on the deployment's channel {prefix}:events, as "KIND KEY". It is
-- sharded pub/sub (SPUBLISH): the channel hashes to the slot of the keys, so
-- on Redis Cluster it stays on the node that holds them. Only the call that
-- makes a transition announces it, so each is published exactly once.
local function announce(kind)
  local tag = string.match(h, '^{[^}]*}:')
  redis.call('SPUBLISH', tag .. 'events', kind .. ' ' .. string.sub(h, #tag + 3))
end

-- list adds (or with remove, removes) the guard's name to (from) the set
-- KEYS[2] that lists the standing marks of its kind ({prefix}:parked,
-- {prefix}:needs_human), so that a status lists them in one call. The sets
-- hold only marks that never expire, and vanish when emptied.
local function list(remove)
  local tag = string.match(h, '^{[^}]*}:')
  local cmd = 'SADD'
  if remove then
    cmd = 'SREM'
  end
  redis.call(cmd, KEYS[2], string.sub(h, #tag + 3))
end

-- RespawnBudget. The key is a string: the latest time (16 characters), then
-- the window; while parked, then a newline, the park's time (16), attempts,
-- a newline, its reason (never holding a newline), a newline and its cause
-- (anything). A string needs two commands a decision (GET, and SET with PX
-- or, to keep a park forever, without), where a hash needs three (HMGET,
-- HSET, PEXPIRE): the budget is the hottest path of all.

if string.sub(op, 1, 7) == 'budget_' then -- its helpers are made only for its calls
  -- budget returns the latest time kept (or false), the window, and the park
  -- (false, or since, attempts, reason and cause as strings).
  local function budget()
    local v = redis.call('GET', h)
    if not v then
      return false, '', false
    end
    local nl = string.find(v, '\n', 17, true)
    if not nl then
      return string.sub(v, 1, 16), string.sub(v, 17), false
    end
    local a = string.find(v, '\n', nl + 17, true)
    local r = string.find(v, '\n', a + 1, true)
    return string.sub(v, 1, 16), string.sub(v, 17, nl - 1),
      {string.sub(v, nl + 1, nl + 16), string.sub(v, nl + 17, a - 1), string.sub(v, a + 1, r - 1), string.sub(v, r + 1)}
  end

  -- keep writes the budget: a key that is not parked expires ttl ms from now,
  -- a parked one never.
  local function keep(ts, w, p)
    if p then
      redis.call('SET', h, ts .. w .. '\n' .. p[1] .. p[2] .. '\n' .. p[3] .. '\n' .. p[4])
    else
      redis.call('SET', h, ts .. w, 'PX', ttl)
    end
  end

  -- parked returns the park p as a reply: reason, cause, attempts, since.
  local function parked(p)
    return {p[3], p[4], tonumber(p[2]), tonumber(p[1])}
  end

  -- budget_failed and budget_park return an outcome: 0 respawn scheduled, 1
  -- parked by this call, 2 already parked; then the time used; then the
  -- attempt (0) or the park (1, 2): reason, cause, attempts, since.
  if op == 'budget_failed' or op == 'budget_park' then
    -- ARGV: window; for budget_failed max respawns and cause, for budget_park
    -- (a park decided outside the budget) reason and cause.
    local last, w, p = budget()
    local t, ts = latest(last)
    if p then -- a parked key records nothing and keeps its first park
      keep(ts, w, p)
      local r = parked(p)
      return {2, now, r[1], r[2], r[3], r[4]}
    end
    w = prune(w, t, tonumber(ARGV[4]))
    local n = #w / 16
    local reason = 'respawn_budget_exhausted'
    if op == 'budget_park' then
      reason = ARGV[5]
    elseif n < tonumber(ARGV[5]) then
      keep(ts, w .. ts, false)
      return {0, now, n + 1}
    end
    keep(ts, w, {nows, string.format('%d', n), reason, ARGV[6]})
    list(false)
    announce('parked')
    return {1, now, reason, ARGV[6], n, now}
  end

  if op == 'budget_view' then
    -- ARGV: window. Returns the respawns in the window, then the park if any.
    local last, w, p = budget()
    local t, ts = latest(last)
    keep(ts, w, p)
    local n = #prune(w, t, tonumber(ARGV[4])) / 16
    if not p then
      return {n}
    end
    local r = parked(p)
    return {n, r[1], r[2], r[3], r[4]}
  end

  if op == 'budget_spawn' then
    -- Returns the park if any, else nothing.
    local _, _, p = budget()
    if not p then
      return {}
    end
    return parked(p)
  end

  if op == 'budget_resume' then
    -- Clears the park and the window (a full budget); keeps the latest time.
    -- Returns 0 if not parked, else 1, the time, the reason and the cause.
    local last, _, p = budget()
    if not p then
      return {0}
    end
    keep(last, '', false)
    list(true)
    announce('resumed')
    return {1, now, p[3], p[4]}
  end

  if op == 'budget_settle' then
    -- A healthy run: clears the window of a key that is not parked, keeping
    -- its expiry.
    local last, w, p = budget()
    if last and not p and w ~= '' then
      redis.call('SET', h, last, 'KEEPTTL')
    end
    return {}
  end

  if op == 'budget_forget' then
    -- Drops the key's state, parked or not; keeps the latest time.
    local last, _, p = budget()
    if last then
      keep(last, '', false)
    end
    if p then
      list(true)
      announce('resumed')
    end
    return {}
  end
end

-- push returns window w with ts added, keeping the newest limit times.
local function push(w, ts, limit)
  w = w .. ts
  if #w > limit * 16 then
    w = string.sub(w, #w - limit * 16 + 1)
  end
  return w
end

-- live makes the key expire ttl ms from now, or never while keep holds.
local function live(keep)
  if keep then
    redis.call('PERSIST', h)
  else
    redis.call('PEXPIRE', h, ttl)
  end
end

-- ChainDetector. Fields: t; ci incarnation, cl time and cn count of the
-- newest rescue; ce while marked needs-human.

-- chain returns the chain of incarnation inc ending at t.
local function chain(f, inc, t, gap)
  local n = tonumber(f[4]) or 0
  if n == 0 or f[2] ~= inc or t - tonumber(f[3]) > gap then
    return 0
  end
  return n
end

if op == 'chain_rescue' then
  -- ARGV: max chain, reset gap, incarnation, reactive (1 or 0). Returns an
  -- outcome (0 rescued, 1 marked needs-human by this call, 2 already
  -- marked), the time used, the chain, and for 2 the incarnation marked.
  local inc = ARGV[6]
  local f = redis.call('HMGET', h, 't', 'ci', 'cl', 'cn', 'ce')
  local t, ts = latest(f[1])
  if f[5] then
    redis.call('HSET', h, 't', ts)
    return {2, now, tonumber(f[4]), f[2]}
  end
  local n = chain(f, inc, t, tonumber(ARGV[5]))
  if n >= tonumber(ARGV[4]) then
    redis.call('HSET', h, 't', ts, 'ce', 1)
    live(true)
    list(false)
    announce('needs_human')
    return {1, now, n}
  end
  if ARGV[7] == '1' then
    n = n + 1
  else
    n = 0
  end
  redis.call('HSET', h, 't', ts, 'ci', inc, 'cl', ts, 'cn', n)
  live(false)
  return {0, now, n}
end

if op == 'chain_view' then
  -- ARGV: reset gap, incarnation. Returns the chain ending now.
  local f = redis.call('HMGET', h, 't', 'ci', 'cl', 'cn', 'ce')
  local t, ts = latest(f[1])
  redis.call('HSET', h, 't', ts)
  live(f[5])
  return {chain(f, ARGV[5], t, tonumber(ARGV[4]))}
end

if op == 'chain_marked' then
  -- Returns 1 when the key is marked needs-human.
  return {redis.call('HEXISTS', h, 'ce')}
end

if op == 'chain_clear' then
  -- Forgets the chain and the mark; keeps the latest time.
  local marked = redis.call('HEXISTS', h, 'ce') == 1
  redis.call('HDEL', h, 'ci', 'cl', 'cn', 'ce')
  live(false)
  if marked then
    list(true)
    announce('cleared')
  end
  return {}
end

-- RestartLoopGuard. The key is a string, as a budget's: the latest time (16
-- characters), then the window.

if op == 'guard_record' or op == 'guard_view' then
  -- ARGV: window, max restarts. guard_record returns tripped (1/0),
  -- tripped by this restart (1/0), the restarts in the window, the time
  -- used; guard_view the restarts in the window.
  local v = redis.call('GET', h) or ''
  local t, ts = latest(v ~= '' and string.sub(v, 1, 16))
  local w = prune(string.sub(v, 17), t, tonumber(ARGV[4]))
  if op == 'guard_view' then
    redis.call('SET', h, ts .. w, 'PX', ttl)
    return {#w / 16}
  end
  local max = tonumber(ARGV[5])
  local was = #w / 16 >= max
  w = push(w, ts, max)
  redis.call('SET', h, ts .. w, 'PX', ttl)
  local n = #w / 16
  local trip = n >= max
  return {trip and 1 or 0, (trip and not was) and 1 or 0, n, now}
end

if op == 'guard_reset' then
  -- Clears the window, keeping the latest time and the expiry.
  local v = redis.call('GET', h)
  if v then
    redis.call('SET', h, string.sub(v, 1, 16), 'KEEPTTL')
  end
  return {}
end

-- FleetSupervisionPolicy. Fields: t; w the restarts of the rolling hour; ft
-- 1 while tripped, fs the time of the trip or of its latest extension, ff
-- and fn the failing and total members as last noted (summed over the
-- replicas' reports, r:REPLICA).
-- Each fleet result: tripped now (1/0), re-armed by this call (1/0), tripped
-- by this call (1/0), restarts in the hour at the trip, failing and total as
-- announced with a re-arm, the time used; fleet_status adds the restarts in
-- the hour and the time of the trip (0 unless tripped), fleet_state the
-- failing and total it noted (the sums of the live reports).

local HOUR = 3600000000 -- the fleet's rolling hour, in microseconds

if op == 'fleet_restart' or op == 'fleet_state' or op == 'fleet_tripped' or op == 'fleet_status' then
  -- ARGV: restarts per hour, cooldown (rounded up to a microsecond); for
  -- fleet_state: failing fraction (as Go formats a float64, read back
  -- exactly), min failing, the reporting replica, its failing and total
  -- (clamped by the caller), and how long its report lives (0: forever).
  local rph, cooldown = tonumber(ARGV[4]), tonumber(ARGV[5])
  local f = redis.call('HMGET', h, 't', 'w', 'ft', 'fs', 'ff', 'fn')
  local t, ts = latest(f[1])
  local tripped, since = f[3] == '1', tonumber(f[4]) or 0
  local failing, total = tonumber(f[5]) or 0, tonumber(f[6]) or 0
  local noted, notedTotal = failing, total -- as announced with a re-arm
  local w = f[2] or ''
  local set = {'HSET', h, 't', ts}
  if op == 'fleet_restart' and not tripped then -- armed, and the restart does not trip it
    w = prune(w, t, HOUR)
    if #w / 16 + 1 < rph then
      redis.call('HSET', h, 't', ts, 'w', w .. ts)
      live(false)
      return {0, 0, 0, 0, failing, total, now}
    end
  end
  -- A breaker whose cooldown has ended at t re-arms (an age of exactly the
  -- cooldown re-arms), with the hour cleared.
  local re = 0
  if tripped and t - since >= cooldown then
    tripped, re, w = false, 1, ''
    set[#set + 1], set[#set + 2] = 'ft', 0
  end
  local trip, n, hold = 0, 0, false
  if op == 'fleet_restart' and not tripped then
    w = push(prune(w, t, HOUR), ts, rph)
    n = #w / 16
    if n >= rph then
      trip, hold = 1, true
    end
  elseif op == 'fleet_state' then
    -- Each replica reports its own members in field r:REPLICA as
    -- "failing,total,expiry" (expiry 0: never); the fleet state is the sum
    -- of the reports alive at t (age at most their lifetime), and a report
    -- whose replica stopped reporting is dropped. One replica whose report
    -- never expires is the library's single noted state.
    local exp, life = 0, tonumber(ARGV[11])
    if life > 0 then
      exp = t + life
    end
    redis.call('HSET', h, 'r:' .. ARGV[8], ARGV[9] .. ',' .. ARGV[10] .. ',' .. string.format('%d', exp))
    local all = redis.call('HGETALL', h)
    failing, total = 0, 0
    for i = 1, #all, 2 do
      if string.sub(all[i], 1, 2) == 'r:' then
        local a, b, e = string.match(all[i + 1], '^(%d+),(%d+),(%d+)$')
        e = tonumber(e)
        if e ~= 0 and t > e then
          redis.call('HDEL', h, all[i])
        else
          failing, total = failing + tonumber(a), total + tonumber(b)
        end
      end
    end
    set[#set + 1], set[#set + 2] = 'ff', string.format('%d', failing)
    set[#set + 1], set[#set + 2] = 'fn', string.format('%d', total)
    if failing >= tonumber(ARGV[7]) and failing / total >= tonumber(ARGV[6]) then
      -- trips, or extends the hold of a tripped breaker
      if not tripped then
        w = prune(w, t, HOUR)
        trip, n = 1, #w / 16
      end
      hold = true
    end
  end
  if hold then
    tripped, since = true, t
    set[#set + 1], set[#set + 2], set[#set + 3], set[#set + 4] = 'ft', 1, 'fs', ts
  end
  local hour = 0
  if op == 'fleet_status' then
    w = prune(w, t, HOUR)
    hour = #w / 16
  end
  set[#set + 1], set[#set + 2] = 'w', w
  redis.call(unpack(set))
  live(tripped)
  if re == 1 then
    announce('fleet_rearmed')
  end
  if trip == 1 then
    announce('fleet_tripped')
  end
  local r = {tripped and 1 or 0, re, trip, n, noted, notedTotal, now}
  if op == 'fleet_status' then
    if not tripped then
      since = 0
    end
    r[8], r[9] = hour, since
  elseif op == 'fleet_state' then
    r[8], r[9] = failing, total
  end
  return r
end

if op == 'fleet_reset' then
  -- Clears the hour, the noted state and any trip; keeps the latest time.
  local tripped = redis.call('HGET', h, 'ft') == '1'
  local all = redis.call('HKEYS', h)
  for _, k in ipairs(all) do
    if string.sub(k, 1, 2) == 'r:' then
      redis.call('HDEL', h, k)
    end
  end
  redis.call('HDEL', h, 'w', 'ft', 'fs', 'ff', 'fn')
  live(false)
  if tripped then
    announce('fleet_rearmed')
  end
  return {}
end

return redis.error_reply('crashloop: unknown operation ' .. tostring(op))
