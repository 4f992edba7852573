-- crashloop's Ledger on Redis: every method of a Store is one call of this
-- script, one atomic step, with the semantics of the library's MemoryLedger
-- (judge.go: rules.judge, park, rearm, proceed; fleet.go; ledger.go), which
-- the conformance suite (ledgertest) holds it to.
--
-- Call: ARGV[1] names the operation; KEYS are the deployment's keys the
-- operation touches, all under its hash tag {prefix}, so that the call is
-- legal on Redis Cluster. A rearm also writes the records of held keys,
-- which it finds in {prefix}:held: same tag, same slot.
--
-- Keys of a deployment (see keyspace in script.go):
--   {p}:k:KEY      string  the record of KEY (see rdec)
--   {p}:fleet      string  the deployment's latest time, the fleet breaker
--                          and the hold counter (see fload)
--   {p}:parked     set     the keys that stand parked (Parked in one call)
--   {p}:held       zset    the keys held by the fleet breaker, scored by
--                          the order they were held in
--   {p}:r:REPLICA  string  a replica's report of its members, "members,failing"
--   {p}:replicas   set     the replicas that report
--   {p}:events     sharded pub/sub channel: parks and resumes (see notice)
--
-- Numbers: Lua numbers are doubles, exact for integers below 2^53. Times are
-- integer microseconds since the Unix epoch, kept as decimal strings 16
-- characters wide (zero-padded; the years 1970 to 2286), read with tonumber
-- and never formatted with Lua's default 14 digits. Durations: windows and
-- gaps in whole microseconds rounded down, the cooldown rounded up (the
-- caller converts them; both give the in-memory answers for ages in whole
-- microseconds), and the cooldown in nanoseconds too, for the waits.
--
-- Time: ARGV[2] is the time of the call in microseconds, '' for the
-- server's clock, or '-' for an operation that reads none (TIME: Redis 7 replicates scripts by their effects, so a
-- script may read it). The deployment keeps one latest time, in
-- {p}:fleet; a time earlier than it is read as it, so time never runs
-- backwards for a deployment (the library's rule for one ledger). The
-- budget step at the server's time keeps time per key instead (see it).
--
-- Expiry: every key expires on its own, its TTL (milliseconds, computed by
-- the caller from the configuration) after its last write, except a parked
-- record while the park stands and, while the fleet breaker is tripped,
-- {p}:fleet and {p}:held (the re-arm must be seen to be announced, and to
-- release the held restarts in order). {p}:parked holds only parks, which
-- never expire, and vanishes when emptied.

-- A and K are ARGV and KEYS, as locals: the budget step below hands a
-- call it does not decide to the judge, in the judge's arguments.
local A, K = ARGV, KEYS
local op = A[1]
local K1 = K[1]

local now, nows
if A[2] == '' then
  local tm = redis.call('TIME') -- seconds (10 digits until 2286) and microseconds
  nows = tm[1] .. string.sub('00000' .. tm[2], -6)
  now = tonumber(nows)
elseif A[2] ~= '-' then
  now, nows = tonumber(A[2]), A[2] -- the caller sends 16 digits
end

-- armed reads the fleet string fv (see fload) for a fast path: false when
-- the breaker is tripped or was written with another configuration than
-- cfg ('rph,cooldown-ns,'), else the time of the step: ts, or the
-- deployment's latest time if that is later (16 digits each: the later
-- string is the later time).
local function armed(fv, cfg, ts)
  if string.sub(fv, 17, 17) ~= '0' or string.sub(fv, 34, 33 + #cfg) ~= cfg then
    return false
  end
  local l = string.sub(fv, 1, 16)
  if l > ts then
    return l
  end
  return ts
end

-- The budget step ('b'): the judge of a deployment guarded by a respawn
-- budget alone (no chain, no per-key guard, no hourly cap, no fleet
-- breaker) in a short call, the shortest a step of a window can be: the
-- judge's decision with 9 arguments instead of 26 and, at the server's
-- time, one key read and written. KEYS: record, fleet, parked. ARGV: 'b',
-- the time, MaxRespawns, the window (µs), the record's TTL (ms), ending,
-- healthy (1/0), cause, origin.
--
-- Time: the time of the step is the call's, or the latest time the key's
-- window holds if that is later (a time is never earlier than one the
-- key recorded), and with the caller's clock also the deployment's latest
-- time, which it raises, as the judge does. At the server's time it reads
-- and writes no deployment time: a budget alone keeps no state but the
-- key's, and one clock, the server's, dates every step.
--
-- It decides a clean run, a crash, a planned restart and a granted
-- respawn, and hands anything else (a park, a parked or held key, a record
-- with other guards' state, a breaker written by another configuration)
-- to the judge, which reads afresh and decides in full.
if op == 'b' then
  repeat
    local t, ts, rv, fv = now, nows, nil, nil
    if A[2] == '' then
      rv = redis.call('GET', K1)
    else
      local vs = redis.call('MGET', K1, K[2])
      rv, fv = vs[1], vs[2]
      if fv then
        local l = armed(fv, '0,0,', ts) -- a budget alone: no breaker
        if not l then
          break
        end
        t, ts = tonumber(l), l
      end
    end
    local n, b = 0, ''
    if rv then
      -- the record (see rdec): not held, a budget's window and nothing else
      local rn, i = string.match(rv, '^(%d+),0,%d+,0,0,0,0,0;()')
      if not rn then
        break
      end
      n, b = tonumber(rn), string.sub(rv, i)
      local l = string.sub(b, -16)
      if l > ts then
        t, ts = tonumber(l), l
      end
    end
    local e, attempt = A[6], 0
    if e == '2' then -- a permanent failure parks
      break
    end
    if e == '1' or A[7] == '1' then
      b = '' -- a healthy run, or one that finished its work, was a good start
    end
    if e == '3' then -- a failed start: prune (see prune), then count
      local span, j, m = tonumber(A[4]), 1, #b
      while j <= m and t - tonumber(string.sub(b, j, j + 15)) > span do
        j = j + 16
      end
      if j > 1 then
        b = string.sub(b, j)
      end
      if #b / 16 >= tonumber(A[3]) then -- spent: a park
        break
      end
      b = b .. ts
      attempt = #b / 16
    end
    if e ~= '1' then
      n = n + 1
    end
    -- counts, which Lua's default format writes whole below 10^14
    redis.call('SET', K1, n .. ',0,' .. #b / 16 .. ',0,0,0,0,0;' .. b, 'PX', A[5])
    if A[2] ~= '' then
      if fv then
        fv = ts .. string.sub(fv, 17)
      else
        fv = ts .. '00000000000000000' .. '0,0,0,0,0,\n' -- see fload
      end
      redis.call('SET', K[2], fv, 'PX', A[5])
    end
    return {now, 0, attempt, n}
  until true
  -- The judge's arguments for a budget alone (see config), and its keys.
  A = {'judge', A[2], A[3], A[4], '0', '0', '0', '0', '0', '0', '0,0,', '0', '0', '1', '0', A[5], A[5], '0',
    A[6], A[7], '', A[8], '0', '0', A[9], ''}
  local tg = string.match(K1, '^{[^}]*}:')
  K = {K1, K[2], K[3], tg .. 'held', tg .. 'r:', tg .. 'replicas'}
  op = 'judge'
end

local tag = string.match(K1, '^{[^}]*}:')
local HOUR = 3600000000 -- the fleet's rolling hour, in microseconds

-- prune returns window w (times packed 16 characters each, oldest first)
-- without the times older than span at t: a time counts while its age is at
-- most span.
local function prune(w, t, span)
  local i, n = 1, #w
  while i <= n and t - tonumber(string.sub(w, i, i + 15)) > span do
    i = i + 16
  end
  if i > 1 then
    return string.sub(w, i)
  end
  return w
end

-- report writes this replica's report of its members, rep, unless it
-- stands already (the Store's refresher keeps it alive): KEYS[5] the
-- report, KEYS[6] the set of replicas, ARGV[18] its TTL, ARGV[26] the
-- replica's name. A new report lists the replica, and drops the replicas
-- whose report expired.
local function report(rep)
  local old = redis.call('GET', K[5])
  if old == rep then
    return
  end
  redis.call('SET', K[5], rep, 'PX', A[18])
  if not old then
    for _, name in ipairs(redis.call('SMEMBERS', K[6])) do
      if redis.call('EXISTS', tag .. 'r:' .. name) == 0 then
        redis.call('SREM', K[6], name)
      end
    end
    redis.call('SADD', K[6], A[26])
    redis.call('PEXPIRE', K[6], A[18])
  end
end

-- The fast path: a judge that grants a restart (a failed start, a crash or
-- a planned restart) to a key that is neither parked nor held, while the
-- breaker is armed, and that neither parks the key nor trips the breaker:
-- nearly every decision. It makes no helper but prune and report (each
-- helper is a closure, made afresh by every call, and a call pays for
-- every Lua step), and writes nothing until it knows the decision is
-- this one; anything else leaves the loop (break) for the general path
-- below, which reads afresh and decides in full. It decides exactly as
-- the general path would (the conformance and differential tests go
-- through both).
if op == 'judge' and A[19] ~= '1' and A[19] ~= '2' then
  repeat
    -- one read: the fleet string, the record and this replica's report
    local vs = redis.call('MGET', K[2], K1, K[5])
    -- the fleet string (see fload): armed, written with this configuration
    local fv = vs[1]
    local t, ts, head, fw = now, nows, nil, ''
    if fv then
      local l = armed(fv, A[11], nows)
      if not l then
        break
      end
      t, ts = tonumber(l), l
      local nl = string.find(fv, '\n', 34, true)
      head, fw = string.sub(fv, 17, nl), string.sub(fv, nl + 1)
    else
      head = '00000000000000000' .. A[11] .. '0,0,0,\n'
    end
    -- the record (see rdec): neither parked nor held
    local rv = vs[2]
    local n, b, g, h, c = 0, '', '', '', ''
    if rv then
      local rn, held, nb, ng, nh, lc, lp, lr, i =
        string.match(rv, '^(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+);()')
      if held ~= '0' or lp ~= '0' or lr ~= '0' then
        break
      end
      n, nb, ng, nh = tonumber(rn), nb * 16, ng * 16, nh * 16
      b = string.sub(rv, i, i + nb - 1)
      i = i + nb
      g = string.sub(rv, i, i + ng - 1)
      i = i + ng
      h = string.sub(rv, i, i + nh - 1)
      c = string.sub(rv, i + nh, i + nh + lc - 1)
      local l = string.sub(b, -16)
      if l > ts then -- the key's latest time (see the budget step)
        t, ts = tonumber(l), l
      end
    end
    if A[20] == '1' then
      b = '' -- a healthy run was a good start
    end
    local attempt = 0
    if A[19] == '3' then -- a failed start: the budget
      b = prune(b, t, tonumber(A[4]))
      if #b / 16 >= tonumber(A[3]) then
        break
      end
      b = b .. ts
      attempt = #b / 16
    elseif A[5] ~= '0' then -- a crash or a planned restart: the chain
      local cmax, cn, inc = tonumber(A[5]), 0, A[21]
      if c ~= '' then
        local colon = string.find(c, ':', 17, true)
        if string.sub(c, colon + 1) == inc and t - tonumber(string.sub(c, 1, 16)) <= tonumber(A[6]) then
          cn = tonumber(string.sub(c, 17, colon - 1))
        end
      end
      if A[19] == '4' then
        if cn >= cmax then
          break
        end
        c = ts .. (cn + 1) .. ':' .. inc
      elseif cn < cmax then -- a planned restart ends the chain, but a full one
        c = ''
      end
    end
    if A[7] ~= '0' then -- the per-key guard
      g = prune(g, t, tonumber(A[8]))
      if #g / 16 >= tonumber(A[7]) then
        break
      end
      g = g .. ts
    end
    if A[9] ~= '0' then -- the hourly cap
      h = prune(h, t, HOUR)
      if #h / 16 >= tonumber(A[9]) then
        break
      end
      h = h .. ts
    end
    if A[10] ~= '0' then -- the fleet's hour
      fw = prune(fw, t, HOUR)
      if #fw / 16 + 1 >= tonumber(A[10]) then
        break
      end
      fw = fw .. ts
    end
    n = n + 1
    redis.call('SET', K1, string.format('%d,0,%d,%d,%d,%d,0,0;', n, #b / 16, #g / 16, #h / 16, #c) ..
      b .. g .. h .. c, 'PX', A[16])
    redis.call('SET', K[2], ts .. head .. fw, 'PX', A[17])
    local rep = ''
    if A[10] ~= '0' then
      rep = (A[23] + 1) .. ',' .. A[24]
      if vs[3] ~= rep then
        report(rep)
      end
    end
    return {now, 0, attempt, n, rep}
  until true
end

-- push returns window w with ts added, keeping the newest limit times.
local function push(w, ts, limit)
  w = w .. ts
  if #w > limit * 16 then
    w = string.sub(w, #w - limit * 16 + 1)
  end
  return w
end

-- field writes s so that it can be read back from a longer string: its
-- length, a colon, and s.
local function field(s)
  return #s .. ':' .. s
end

-- A record (rdec, renc) is a string: a header
--   restarts,held,nb,ng,nh,lc,lp,lr;
-- then the budget's window (nb times), the per-key guard's (ng), the hourly
-- cap's (nh), the chain (lc bytes: the time of its newest rescue, 16
-- characters, then its length, a colon and the incarnation; absent while
-- the chain is empty), the park (lp bytes: since, 16 characters, then
-- attempts, a comma, the reason as a field, and the cause: '' for none,
-- else 'e' and its text) and the release of a held restart (lr bytes: the
-- time of the re-arm, 16 characters, then the restart's offset from it in
-- nanoseconds). held is the order the key was held in by the fleet
-- breaker, 0 when it is not held.
local function rdec(v)
  local r = {n = 0, held = 0, b = '', g = '', h = '', c = false, p = false, rel = false}
  if not v then
    return r
  end
  local n, held, nb, ng, nh, lc, lp, lr, i =
    string.match(v, '^(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+);()')
  r.n, r.held = tonumber(n), tonumber(held)
  nb, ng, nh, lc, lp, lr = nb * 16, ng * 16, nh * 16, tonumber(lc), tonumber(lp), tonumber(lr)
  r.b = string.sub(v, i, i + nb - 1)
  i = i + nb
  r.g = string.sub(v, i, i + ng - 1)
  i = i + ng
  r.h = string.sub(v, i, i + nh - 1)
  i = i + nh
  if lc > 0 then
    local c = string.sub(v, i, i + lc - 1)
    local colon = string.find(c, ':', 17, true)
    r.c = {last = string.sub(c, 1, 16), count = tonumber(string.sub(c, 17, colon - 1)), inc = string.sub(c, colon + 1)}
    i = i + lc
  end
  if lp > 0 then
    local p = string.sub(v, i, i + lp - 1)
    local comma = string.find(p, ',', 17, true)
    local colon = string.find(p, ':', comma + 1, true)
    local rl = tonumber(string.sub(p, comma + 1, colon - 1))
    r.p = {since = string.sub(p, 1, 16), attempts = string.sub(p, 17, comma - 1),
      reason = string.sub(p, colon + 1, colon + rl), cause = string.sub(p, colon + rl + 1)}
    i = i + lp
  end
  if lr > 0 then
    r.rel = {at = string.sub(v, i, i + 15), off = string.sub(v, i + 16, i + lr - 1)}
  end
  return r
end

local function renc(r)
  local c, p, rel = '', '', ''
  if r.c then
    c = r.c.last .. r.c.count .. ':' .. r.c.inc
  end
  if r.p then
    p = r.p.since .. r.p.attempts .. ',' .. field(r.p.reason) .. r.p.cause
  end
  if r.rel then
    rel = r.rel.at .. r.rel.off
  end
  return table.concat({r.n, ',', string.format('%d', r.held), ',', #r.b / 16, ',', #r.g / 16, ',', #r.h / 16, ',',
    #c, ',', #p, ',', #rel, ';', r.b, r.g, r.h, c, p, rel})
end

-- rsave writes record r to key: a parked record never expires, another one
-- ttl ms from now (keep: with the expiry it has).
local function rsave(key, r, ttl)
  if r.p then
    redis.call('SET', key, renc(r))
  elseif ttl == 'keep' then
    redis.call('SET', key, renc(r), 'KEEPTTL')
  else
    redis.call('SET', key, renc(r), 'PX', ttl)
  end
end

-- parkReply is the park p as the reply gives it: reason, attempts, since,
-- cause; four empty values when there is none.
local function parkReply(p)
  if not p then
    return '', 0, 0, ''
  end
  return p.reason, tonumber(p.attempts), tonumber(p.since), p.cause
end

-- notice publishes a park (p) or a resume (p false) of key on the
-- deployment's channel, with the origin of the change, so that the Store
-- that made it can ignore it: 'P' or 'R', the origin and the key as fields,
-- then for a park its since (16), attempts, a comma, its reason as a field
-- and its cause. It is sharded pub/sub (SPUBLISH): the channel hashes to the
-- slot of the keys, so on Redis Cluster it stays on the node that holds
-- them. Only the step that makes a change announces it: each is published
-- once.
local function notice(origin, key, p)
  local msg
  if p then
    msg = 'P' .. field(origin) .. field(key) .. p.since .. p.attempts .. ',' .. field(p.reason) .. p.cause
  else
    msg = 'R' .. field(origin) .. field(key)
  end
  redis.call('SPUBLISH', tag .. 'events', msg)
end

-- The fleet string (fload, fsave): the latest time (16 characters), the
-- breaker's state ('1' tripped, else '0'), the time of the trip or of its
-- latest extension (16), then rph,cooldown-ns, (the configuration last
-- written: the fast path compares it with its own, and a reader that has
-- none, an operator's status, reads it), then holds,failing,total, the
-- reason, a newline, and the restarts of the rolling hour (the window).
local function fload()
  local v = redis.call('GET', tag .. 'fleet')
  local f = {t = 0, ts = string.format('%016d', 0), tripped = false, since = 0, sinces = string.format('%016d', 0),
    holds = 0, failing = 0, total = 0, rph = 0, cdns = '0', reason = '', w = ''}
  if v then
    local nl = string.find(v, '\n', 34, true)
    local rph, cdns, holds, failing, total, reason =
      string.match(string.sub(v, 34, nl - 1), '^(%d+),(%d+),(%d+),(%d+),(%d+),(.*)$')
    f.ts, f.tripped, f.sinces = string.sub(v, 1, 16), string.sub(v, 17, 17) == '1', string.sub(v, 18, 33)
    f.t, f.since = tonumber(f.ts), tonumber(f.sinces)
    f.holds, f.failing, f.total, f.rph = tonumber(holds), tonumber(failing), tonumber(total), tonumber(rph)
    f.cdns, f.reason, f.w = cdns, reason, string.sub(v, nl + 1)
  end
  return f
end

-- fsave writes the fleet string: it never expires while tripped, else ttl
-- ms from now.
local function fsave(f, ttl)
  local flag = '0'
  if f.tripped then
    flag = '1'
  end
  local v = f.ts .. flag .. f.sinces .. f.rph .. ',' .. f.cdns .. ',' .. string.format('%d', f.holds) .. ',' ..
    f.failing .. ',' .. f.total .. ',' .. f.reason .. '\n' .. f.w
  if f.tripped then
    redis.call('SET', tag .. 'fleet', v)
  else
    redis.call('SET', tag .. 'fleet', v, 'PX', ttl)
  end
end

-- at raises the deployment's latest time to now and returns the time the
-- step uses: now, or the latest time if that is later.
local function at(f)
  if now > f.t then
    f.t, f.ts = now, nows
  end
  return f.t
end

-- change is the FleetChange of the breaker as it stands: reason, restarts
-- in the hour, failing, total.
local function change(f)
  return {f.reason, #f.w / 16, f.failing, f.total}
end

-- rearm re-arms the tripped breaker whose cooldown has ended at t (an age
-- of exactly the cooldown re-arms), clearing the hour, and schedules the
-- release of the restarts it held: in the order they were held, spread
-- evenly over one cooldown from t (rules.rearm). It returns the re-arm's
-- change, or false. The record of a held key that has expired meanwhile
-- leaves the held set.
local function rearm(f, t, cdus, cdns, fttl)
  if not f.tripped or t - f.since < cdus then
    return false
  end
  f.tripped, f.w = false, ''
  local held = redis.call('ZRANGE', tag .. 'held', 0, -1)
  local n = #held
  if n > 0 then
    local gap = math.floor(cdns / n)
    for i, key in ipairs(held) do
      local rk = tag .. 'k:' .. key
      local v = redis.call('GET', rk)
      if v then
        local r = rdec(v)
        r.rel = {at = f.ts, off = string.format('%d', (i - 1) * gap)}
        rsave(rk, r, 'keep')
      else
        redis.call('ZREM', tag .. 'held', key)
      end
    end
    redis.call('PEXPIRE', tag .. 'held', fttl)
  end
  return change(f)
end

-- untilRearm returns, in nanoseconds, how long after t the tripped breaker
-- re-arms: at least 1, so that a hold always waits.
local function untilRearm(f, t, cdns)
  local left = cdns - (t - f.since) * 1000
  if left < 1 then
    left = 1
  end
  return left
end

-- The configuration of judge and proceed, ARGV[3] to ARGV[18] (see
-- plan.args in store.go).
local function config()
  return {bmax = tonumber(A[3]), bwin = tonumber(A[4]), cmax = tonumber(A[5]), cgap = tonumber(A[6]),
    gmax = tonumber(A[7]), gwin = tonumber(A[8]), hcap = tonumber(A[9]), rph = tonumber(A[10]),
    cdus = tonumber(A[12]), cdns = tonumber(A[13]), frac = tonumber(A[14]), minf = tonumber(A[15]),
    rttl = A[16], fttl = A[17]}
end

-- begin starts a judge or proceed step: the configuration, the fleet
-- string, the time the step uses, and the re-arm it made (or false). The
-- configuration the step judges by is written with the breaker.
local function begin()
  local c = config()
  local f = fload()
  local t = at(f)
  local re = false
  if c.rph > 0 then
    re = rearm(f, t, c.cdus, c.cdns, c.fttl)
  end
  f.rph, f.cdns = A[10], A[13]
  return c, f, t, re
end

-- reply is a verdict: the time used, flags (1 a new park, 2 held), the
-- attempt, the restarts, the report written, the wait in nanoseconds, the
-- park (reason, attempts, since, cause), the trip and the re-arm (reason,
-- restarts, failing, total; an empty reason for none). The fast path
-- returns the first five, the budget step the first four.
local function reply(flags, attempt, restarts, wait, p, trip, re, rep)
  local pr, pa, ps, pc = parkReply(p)
  trip = trip or {'', 0, 0, 0}
  re = re or {'', 0, 0, 0}
  return {now, flags, attempt, restarts, rep, wait, pr, pa, ps, pc,
    trip[1], trip[2], trip[3], trip[4], re[1], re[2], re[3], re[4]}
end

local CLEAN, PERMANENT, FAILED, CRASH, PLANNED = 1, 2, 3, 4, 5

if op == 'judge' then
  -- KEYS: record, fleet, parked, held, this replica's report, replicas.
  -- ARGV after the configuration: ending, healthy (1/0), incarnation,
  -- cause ('' none, else 'e' and its text), members and failing (this
  -- replica's, without the key), origin, replica.
  local c, f, t, re = begin()
  local ending, healthy, inc, cause = tonumber(A[19]), A[20] == '1', A[21], A[22]
  local members, failing, origin, replica = tonumber(A[23]), tonumber(A[24]), A[25], A[26]
  local r = rdec(redis.call('GET', K1))
  local l = string.sub(r.b, -16)
  if l > f.ts then -- the key's latest time (see the budget step)
    f.t, f.ts = tonumber(l), l
    t = f.t
  end
  local key = string.sub(K1, #tag + 3)
  local flags, attempt, wait, trip = 0, 0, 0, false
  local wasHeld = r.held ~= 0
  if not r.p then
    if healthy or ending == CLEAN then
      r.b = '' -- a healthy run, or one that finished its work, was a good start
    end
    if ending == CLEAN then
      r.g = '' -- a clean run clears the fast guard
    else
      local reason, n
      if ending == PERMANENT then
        r.b = prune(r.b, t, c.bwin)
        reason, n = 'permanent_error', #r.b / 16
      elseif ending == FAILED then
        r.b = prune(r.b, t, c.bwin)
        n = #r.b / 16
        if n >= c.bmax then
          reason = 'respawn_budget_exhausted'
        end
      elseif ending == CRASH and c.cmax > 0 then
        n = 0
        if r.c and r.c.inc == inc and t - tonumber(r.c.last) <= c.cgap then
          n = r.c.count
        end
        if n >= c.cmax then
          reason = 'needs_human'
        end
      end
      if not reason and c.gmax > 0 then
        r.g = prune(r.g, t, c.gwin)
        n = #r.g / 16
        if n >= c.gmax then
          reason = 'restart_loop_guard'
        end
      end
      if not reason and c.hcap > 0 then
        r.h = prune(r.h, t, HOUR)
        n = #r.h / 16
        if n >= c.hcap then
          reason = 'hourly_restart_cap'
        end
      end
      if reason then
        -- The park: no restart is recorded; the fleet judges its failing
        -- fraction with every replica's members and the parked key.
        r.p = {since = nows, attempts = string.format('%d', n), reason = reason, cause = cause}
        r.held, r.rel = 0, false
        flags = 1
        if c.rph > 0 then
          local tm, tf = members, failing
          for _, name in ipairs(redis.call('SMEMBERS', tag .. 'replicas')) do
            if name ~= replica then
              local rep = redis.call('GET', tag .. 'r:' .. name)
              if rep then
                local a, b = string.match(rep, '^(%d+),(%d+)$')
                tm, tf = tm + tonumber(a), tf + tonumber(b)
              else
                redis.call('SREM', tag .. 'replicas', name)
              end
            end
          end
          local total = math.max(tm + 1, 0)
          local fl = math.min(math.max(tf + 1, 0), total)
          f.failing, f.total = fl, total
          if fl >= c.minf and fl / total >= c.frac then
            if f.tripped then
              f.since, f.sinces = t, f.ts -- extend the hold
            else
              f.w = prune(f.w, t, HOUR)
              f.tripped, f.since, f.sinces = true, t, f.ts
              f.reason = string.format('fleet crash-loop: %d/%d keys failing', fl, total)
              trip = change(f)
            end
          end
        end
        redis.call('SADD', K[3], key)
        notice(origin, key, r.p)
      else
        if ending == FAILED then
          r.b = r.b .. f.ts
          attempt = #r.b / 16
        elseif (ending == CRASH or ending == PLANNED) and c.cmax > 0 then
          local cn = 0
          if r.c and r.c.inc == inc and t - tonumber(r.c.last) <= c.cgap then
            cn = r.c.count
          end
          if cn < c.cmax then -- a full chain records nothing
            if ending == CRASH then
              r.c = {last = f.ts, count = cn + 1, inc = inc}
            else
              r.c = false -- a planned restart ends the chain
            end
          end
        end
        if c.gmax > 0 then
          r.g = push(r.g, f.ts, c.gmax)
        end
        if c.hcap > 0 then
          r.h = push(r.h, f.ts, c.hcap)
        end
        r.n = r.n + 1
        if c.rph > 0 then
          if not f.tripped then
            f.w = push(prune(f.w, t, HOUR), f.ts, c.rph)
            local hn = #f.w / 16
            if hn >= c.rph then
              f.tripped, f.since, f.sinces = true, t, f.ts
              f.reason = string.format('fleet crash-loop: %d restarts in 1h', hn)
              trip = change(f)
            end
          end
          if f.tripped then -- held: not counted, released in order at the re-arm
            f.holds = f.holds + 1
            r.held, r.rel = f.holds, false
            flags = 2
            wait = untilRearm(f, t, c.cdns)
            redis.call('ZADD', K[4], f.holds, key)
            redis.call('PERSIST', K[4])
          end
        end
      end
    end
    if wasHeld and r.held == 0 then
      redis.call('ZREM', K[4], key)
    end
    rsave(K1, r, c.rttl)
  end
  fsave(f, c.fttl)
  -- This replica's report: its members and failing members as the verdict
  -- leaves them (reportAfter).
  local rep = ''
  if c.rph > 0 then
    if r.p then
      members, failing = members + 1, failing + 1
    elseif ending ~= CLEAN then
      members = members + 1
    end
    rep = string.format('%d,%d', members, failing)
    report(rep)
  end
  return reply(flags, attempt, r.n, wait, r.p, trip, re, rep)
end

if op == 'proceed' then
  -- KEYS: record, fleet, held. Asks whether the held restart of the key may
  -- go (rules.proceed).
  local c, f, t, re = begin()
  fsave(f, c.fttl)
  local v = redis.call('GET', K1)
  if not v then
    return reply(0, 0, 0, 0, false, false, re, '')
  end
  local r = rdec(v)
  local flags, wait = 0, 0
  if r.p or r.held == 0 then
    flags = 0
  elseif c.rph > 0 and f.tripped then
    flags, wait = 2, untilRearm(f, t, c.cdns)
  else
    local left = 0
    if r.rel then -- the release: the re-arm's time plus the restart's offset
      left = (tonumber(r.rel.at) - t) * 1000 + tonumber(r.rel.off)
    end
    if left > 0 then
      flags, wait = 2, left
    else
      r.held, r.rel = 0, false
      redis.call('ZREM', K[3], string.sub(K1, #tag + 3))
      rsave(K1, r, 'keep')
    end
  end
  return reply(flags, 0, r.n, wait, r.p, false, re, '')
end

if op == 'fleet' then
  -- KEYS: fleet. ARGV[3]: 'w' to raise the latest time (a Store that was
  -- opened, as the library's ledger does), with ARGV[4] the fleet TTL and
  -- ARGV[5] and ARGV[6] its rph and cooldown-ns; 'r' to read only.
  -- Returns the breaker at t as it would be after a re-arm (which it does
  -- not make): tripped (1/0), since, failing and total as the live
  -- replicas report them, restarts in the hour,
  -- rph and cooldown-ns as last written, and the time.
  local f = fload()
  local t = at(f)
  if A[3] == 'w' then
    f.rph, f.cdns = A[5], A[6]
    fsave(f, A[4])
  end
  local cdns = tonumber(f.cdns)
  local tripped, w = f.tripped, f.w
  if tripped and (t - f.since) * 1000 >= cdns then
    tripped, w = false, ''
  end
  local flag = 0
  if tripped then
    flag = 1
  end
  -- failing and total: what every live replica last reported, summed (a
  -- park notes them in the fleet string only when it judges them)
  local failing, total = 0, 0
  for _, name in ipairs(redis.call('SMEMBERS', tag .. 'replicas')) do
    local rep = redis.call('GET', tag .. 'r:' .. name)
    if rep then
      local a, b = string.match(rep, '^(%d+),(%d+)$')
      if a then
        total, failing = total + tonumber(a), failing + tonumber(b)
      end
    end
  end
  return {flag, f.since, failing, total, #prune(w, t, HOUR) / 16, tonumber(f.rph), f.cdns, now}
end

if op == 'lookup' then
  -- KEYS: record. Returns the park, or nothing.
  local r = rdec(redis.call('GET', K1))
  if not r.p then
    return {}
  end
  local pr, pa, ps, pc = parkReply(r.p)
  return {pr, pa, ps, pc}
end

if op == 'resume' or op == 'forget' then
  -- KEYS: record, parked, held. ARGV[3] is the origin. Drops everything
  -- the guards counted for the key (a resume of a key that is not parked
  -- changes nothing) and returns the park it cleared, or nothing.
  local key = string.sub(K1, #tag + 3)
  local r = rdec(redis.call('GET', K1))
  if op == 'resume' and not r.p then
    return {}
  end
  redis.call('DEL', K1)
  redis.call('ZREM', K[3], key)
  if not r.p then
    return {}
  end
  redis.call('SREM', K[2], key)
  notice(A[3], key, false)
  local pr, pa, ps, pc = parkReply(r.p)
  return {pr, pa, ps, pc}
end

if op == 'restore' then
  -- KEYS: parked, then the record of each park. ARGV[3] is the origin, then
  -- four values a park: reason, attempts, since, cause. A key parked
  -- meanwhile keeps its park. Returns how many it wrote.
  local written = 0
  for i = 2, #K do
    local rk, a = K[i], (i - 2) * 4 + 4
    local r = rdec(redis.call('GET', rk))
    if not r.p then
      r.p = {reason = A[a], attempts = A[a + 1], since = A[a + 2], cause = A[a + 3]}
      rsave(rk, r, 'keep')
      local key = string.sub(rk, #tag + 3)
      redis.call('SADD', K[1], key)
      notice(A[3], key, r.p)
      written = written + 1
    end
  end
  return written
end

if op == 'parked' then
  -- KEYS: parked. Returns key, reason, attempts, since, cause for each
  -- park.
  local out = {}
  for _, key in ipairs(redis.call('SMEMBERS', K1)) do
    local r = rdec(redis.call('GET', tag .. 'k:' .. key))
    if r.p then
      local pr, pa, ps, pc = parkReply(r.p)
      out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4], out[#out + 5] = key, pr, pa, ps, pc
    else
      redis.call('SREM', K1, key)
    end
  end
  return out
end

if op == 'report' then
  -- KEYS: this replica's report, replicas. ARGV[3] the report as last
  -- written ('' none yet), ARGV[4] the replica, ARGV[5] the TTL. Keeps the
  -- report of a live replica from expiring.
  if redis.call('PEXPIRE', K1, A[5]) == 0 and A[3] ~= '' then
    redis.call('SET', K1, A[3], 'PX', A[5])
  end
  if A[3] ~= '' then
    redis.call('SADD', K[2], A[4])
  end
  redis.call('PEXPIRE', K[2], A[5])
  return 0
end

return redis.error_reply('crashloop: unknown operation ' .. tostring(op))
