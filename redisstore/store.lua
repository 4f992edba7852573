-- crashloop's share.Ledger on Redis: each Store method is one call of main,
-- one atomic step. Its specification is the Go judgment: rules.judge,
-- rules.proceed, rules.release and rules.rearm (judge.go, with fleet.go,
-- budget.go, chain.go, guard.go, probe.go and cause.go) as
-- share.MemoryLedger runs them; share/ledgertest's differential runs hold
-- the two equal in both time modes (the server's clock and ClientTime).
-- docs/redis.md tells the keys, the calls (argv[1] the operation, argv[2]
-- the epoch the Store knows, then SPEC's), the replies (name/value pairs)
-- and the formats. Numbers are doubles, exact below 2^53; times are integer
-- microseconds since 1970 in 16 digits, now '' the server's TIME. The
-- deployment keeps one latest time, in {p}:fleet: an earlier time reads as it.

local HOUR = 3600000000 -- the fleet's rolling hour, in microseconds
local CLAIM_TTL = 86400 -- how long a claim is kept, in seconds: a day
local ZERO = '0000000000000000' -- the time 0, 16 digits
local D16 = '%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d' -- a time's pattern: 16 digits
local T16 = '^' .. D16 .. '$'
-- A call's own, set by main at each call (a library's locals outlive calls).
local keys, argv, op, K1, tag, A, C, now, nows, FLEET, RECORD, CS

-- SPEC is the arguments of each op after the epoch, in order, each a name and
-- a kind: 'n' a number, 'd' digits (kept as text), 's' a string, 't' a time
-- ('' or 16 digits). restore and members take more after them.
local SPEC = {judge = {'now', 't', 'ending', 's', 'healthy', 'n', 'incarnation', 's', 'cause', 's', 'shared', 's',
  'origin', 's'},
  proceed = {'now', 't'}, fleet = {'now', 't'}, fleet_read = {'now', 't'}, lookup = {}, parked = {},
  resume = {'origin', 's', 'version', 'd'}, forget = {'origin', 's', 'version', 'd'},
  claim = {'version', 'd', 'replica', 's'}, restore = {'origin', 's', 'replica', 's'},
  members = {'replica', 's', 'ttl_ms', 'd', 'full', 'n', 'expect', 'n', 'nadd', 'd'},
  epoch = {'fresh', 's', 'seen', 'd', 'floor', 'd'}, config = {'config', 's'}}
local KINDS = {n = 'number', d = 'whole number', t = "time ('' or 16 digits)"}
local ENDINGS = {clean = true, permanent = true, failed_start = true, crash = true, planned = true}

-- readConfig returns the configuration v (what Open made of the
-- Supervisor's: 21 big-endian 8-byte numbers of format 2; a guard of 0 is
-- off) read, or false. A library keeps what it read of up to 64.
local CONFIG_FORMAT, CONFIGS, NCONFIGS = '>i8i8i8i8i8i8i8i8i8i8i8di8i8i8i8i8i8i8i8i8', {}, 0
local function readConfig(v)
  if CONFIGS[v] then return CONFIGS[v] end
  if #v ~= 168 then return false end
  local c, format = {}
  format, c.budget_max, c.budget_window_us, c.chain_max, c.chain_gap_us, c.guard_max, c.guard_window_us,
    c.hourly_cap, c.fleet_per_hour, c.cooldown_us, c.cooldown_ns, c.fraction, c.min_failing, c.record_ttl_ms,
    c.fleet_ttl_ms, c.probe_after_ns, c.probe_max_ns, c.healthy_ns, c.cause_keys, c.cause_window_ns,
    c.probe_every_ns = struct.unpack(CONFIG_FORMAT, v)
  if format ~= 2 then return false end
  -- the limit as the fleet string keeps it: per hour and cooldown in ns
  c.rph, c.cdns = string.format('%d', c.fleet_per_hour), string.format('%d', c.cooldown_ns)
  c.limit = c.rph .. ',' .. c.cdns .. ','
  if NCONFIGS == 64 then CONFIGS, NCONFIGS = {}, 0 end
  CONFIGS[v], NCONFIGS = c, NCONFIGS + 1
  return c
end

-- prune returns window w (times oldest first: a record's of 16 digits, the
-- fleet's hour's 8-byte big-endian integers, packed) without those older
-- than span at t: a time counts while its age is at most span.
local function prune(w, t, span, packed)
  local i, n = 1, #w
  while i <= n and t - (packed and struct.unpack('>i8', w, i) or tonumber(string.sub(w, i, i + 15))) > span do
    i = i + (packed and 8 or 16)
  end
  return i > 1 and string.sub(w, i) or w
end

-- push returns window w with ts added, keeping the newest limit times.
local function push(w, ts, limit)
  w = w .. ts
  if #w > limit * #ts then w = string.sub(w, #w - limit * #ts + 1) end
  return w
end

-- field writes s to be read back from a longer string: length, ':', s.
local function field(s)
  return #s .. ':' .. s
end

-- add adds the pair name, value to a reply if value is not false or nil.
local function add(out, name, value)
  if value then out[#out + 1], out[#out + 2] = name, value end
end

-- A park (pdec, penc): since (16 digits), attempts, ',', its version (in
-- restore's arguments, the one the parking replica knew), ',', the reason as
-- a field, and the cause ('' none, else 'e' and its text).
local function pdec(p)
  local comma = string.find(p, ',', 17, true)
  local comma2 = string.find(p, ',', comma + 1, true)
  local colon = string.find(p, ':', comma2 + 1, true)
  local rl = tonumber(string.sub(p, comma2 + 1, colon - 1))
  return {since = string.sub(p, 1, 16), attempts = string.sub(p, 17, comma - 1),
    version = string.sub(p, comma + 1, comma2 - 1), reason = string.sub(p, colon + 1, colon + rl),
    cause = string.sub(p, colon + rl + 1)}
end
local function penc(p)
  return p.since .. p.attempts .. ',' .. p.version .. ',' .. field(p.reason) .. p.cause
end

-- bump gives key the next version and returns it, as a string: {p}:seq
-- counts the transitions (park, resume, forget, write-back), {p}:ver keeps
-- each key's last. version returns the version of key, a number (0: none).
local function bump(key)
  local v = redis.call('INCR', tag .. 'seq')
  redis.call('HSET', tag .. 'ver', key, v)
  return string.format('%d', v)
end
local function version(key)
  return tonumber(redis.call('HGET', tag .. 'ver', key) or '0')
end

-- A record (rdec, renc): the header REC, its format (3: another fails the
-- step, crashloop: record_format) and 11 numbers: restarts, held (the order
-- the key was held in, 0: not held), nb, ng, nh, lc, lp, lr, probes (the
-- probes its park let go), lk, lq; then the budget's window (nb times), the
-- guard's (ng), the hourly cap's (nh), the chain (lc bytes: its newest
-- rescue's time, its length, ':', the incarnation), the park (lp), the
-- release of a held restart (lr: the re-arm's time, then the offset in ns),
-- the cause it is held for (lk) and the start of its park's probe interval
-- (lq: 16, see probeWait). One unpack and one pack: no number parsed.
local REC = '>BI4I4I4I4I4I4I4I4I4I4I4'
local function rdec(v)
  local r = {n = 0, held = 0, b = '', g = '', h = '', c = false, p = false, rel = false, probes = 0, cause = '',
    probe = false}
  if not v then return r end
  if string.byte(v, 1) ~= 3 or #v < 45 then error(redis.error_reply('crashloop: record_format')) end
  local _, n, held, nb, ng, nh, lc, lp, lr, probes, lk, lq, i = struct.unpack(REC, v)
  r.n, r.held, r.probes, nb, ng, nh = n, held, probes, nb * 16, ng * 16, nh * 16
  r.b, r.g, r.h = string.sub(v, i, i + nb - 1), string.sub(v, i + nb, i + nb + ng - 1),
    string.sub(v, i + nb + ng, i + nb + ng + nh - 1)
  i = i + nb + ng + nh
  if lc > 0 then
    local c = string.sub(v, i, i + lc - 1)
    local colon = string.find(c, ':', 17, true)
    r.c = {last = string.sub(c, 1, 16), count = tonumber(string.sub(c, 17, colon - 1)), inc = string.sub(c, colon + 1)}
    i = i + lc
  end
  if lp > 0 then r.p = pdec(string.sub(v, i, i + lp - 1)) end
  i = i + lp
  if lr > 0 then r.rel = {at = string.sub(v, i, i + 15), off = string.sub(v, i + 16, i + lr - 1)} end
  r.cause = string.sub(v, i + lr, i + lr + lk - 1)
  if lq > 0 then r.probe = tonumber(string.sub(v, i + lr + lk, i + lr + lk + 15)) end
  return r
end
local function renc(r)
  local c, p, rel, q = '', '', '', r.probe and string.format('%016d', r.probe) or ''
  if r.c then c = r.c.last .. r.c.count .. ':' .. r.c.inc end
  if r.p then p = penc(r.p) end
  if r.rel then rel = r.rel.at .. r.rel.off end
  return struct.pack(REC, 3, r.n, r.held, #r.b / 16, #r.g / 16, #r.h / 16, #c, #p, #rel, r.probes, #r.cause, #q) ..
    r.b .. r.g .. r.h .. c .. p .. rel .. r.cause .. q
end

-- rsave writes record r to key: a park or a hold on a cause never expires,
-- else ttl ms from now (keep: the expiry it has).
local function rsave(key, r, ttl)
  if r.p or r.cause ~= '' then
    redis.call('SET', key, renc(r))
  elseif ttl == 'keep' then
    redis.call('SET', key, renc(r), 'KEEPTTL')
  else
    redis.call('SET', key, renc(r), 'PX', ttl)
  end
end

-- keyOf is the library's key of the record key rk.
local function keyOf(rk)
  return string.sub(rk, #tag + 3)
end

-- parkObject is park p of key as a reply gives it: name/value pairs.
local function parkObject(key, p)
  return {'key', key, 'reason', p.reason, 'attempts', tonumber(p.attempts), 'since', tonumber(p.since),
    'cause', p.cause, 'version', tonumber(p.version)}
end

-- stands is key (record r) as it stands, after flag and its value if any:
-- its version and park.
local function stands(key, r, flag, value)
  local out = flag and {flag, value} or {}
  add(out, 'version', version(key))
  add(out, 'park', r.p and parkObject(key, r.p))
  return out
end

-- notice publishes (SPUBLISH: on the node of the slot) a park (p) or a
-- resume or forget (kind 'F') at version v of key, once, by the step that
-- makes it: 'P', 'R' or 'F', the epoch, the origin and the key as fields,
-- then the park or the version.
local function notice(origin, key, p, v, kind)
  local head = field(A.epoch) .. field(origin) .. field(key)
  redis.call('SPUBLISH', tag .. 'events', p and 'P' .. head .. penc(p) or (kind or 'R') .. head .. v)
end

-- rewrite gives park p of key (record r at rk) the next version and writes
-- it: announced by its writer (a write-back) or by nobody (the move), so
-- claimed by '', which no claimer sends; origin publishes it.
local function rewrite(rk, key, r, p, origin)
  p.version = bump(key)
  redis.call('SET', tag .. 'claim:' .. p.version, '', 'EX', CLAIM_TTL)
  r.p = p
  rsave(rk, r, 'keep')
  notice(origin, key, p)
end

-- parks calls each(key, rk, r) for each parked key (record r at rk), and
-- drops the others from {p}:parked.
local function parks(each)
  for _, key in ipairs(redis.call('SMEMBERS', tag .. 'parked')) do
    local rk = tag .. 'k:' .. key
    local r = rdec(redis.call('GET', rk))
    if r.p then each(key, rk, r) else redis.call('SREM', tag .. 'parked', key) end
  end
end

-- The fleet string (fload, full, fsave): its format (2: another fails the
-- step, crashloop: fleet_format), the latest time (16 digits), its middle
-- (mid: '1' if the breaker is tripped, else '0', the trip's or its last
-- extension's time, 'rph,cooldown_ns,holds,failing,total,', the reason and
-- '\n') and the hour (packed, see prune: a step decodes its oldest time,
-- not every one). fload reads it (read ahead, or else now) but for mid,
-- which full reads when a step needs the breaker.
local NOFLEET = '\2' .. ZERO .. '0' .. ZERO .. '0,0,0,0,0,\n'
local FLEET_HEAD = '^\2' .. D16
local MID = '^(.)(' .. D16 .. ')(%d+),(%d+),(%d+),(%d+),(%d+),([^\n]*)\n$'
local function fload()
  local v = FLEET
  if v == nil then v = redis.call('GET', tag .. 'fleet') end
  v = v or NOFLEET
  local nl = string.find(v, '\n', 35, true)
  if not nl or not string.find(v, FLEET_HEAD) then
    error(redis.error_reply('crashloop: fleet_format'))
  end
  local ts = string.sub(v, 2, 17)
  return {ts = ts, t = tonumber(ts), mid = string.sub(v, 18, nl), w = string.sub(v, nl + 1)}
end
local function full(f)
  if not f.mid then return end
  local flag, sinces, rph, cdns, holds, failing, total, reason = string.match(f.mid, MID)
  if not flag then error(redis.error_reply('crashloop: fleet_format')) end
  f.tripped, f.since, f.sinces, f.rph, f.cdns, f.holds, f.failing, f.total, f.reason, f.mid =
    flag == '1', tonumber(sinces), sinces, rph, cdns, holds, failing, total, reason, nil
end

-- fsave writes the fleet string: no expiry while tripped, else ttl ms.
local function fsave(f, ttl)
  local mid = f.mid or (f.tripped and '1' or '0') .. f.sinces .. f.rph .. ',' .. f.cdns .. ',' .. f.holds .. ',' ..
    f.failing .. ',' .. f.total .. ',' .. f.reason .. '\n'
  local v = '\2' .. f.ts .. mid .. f.w
  if f.tripped then
    redis.call('SET', tag .. 'fleet', v)
  else
    redis.call('SET', tag .. 'fleet', v, 'PX', ttl)
  end
end

-- at raises the latest time to now and returns the step's: the later.
local function at(f)
  if now > f.t then f.t, f.ts = now, nows end
  return f.t
end

-- change is the breaker's FleetChange as a reply gives it.
local function change(f)
  return {'reason', f.reason, 'restarts', #f.w / 8, 'failing', tonumber(f.failing), 'total', tonumber(f.total)}
end

-- trip trips the breaker at t for reason (its hour pruned, the change the
-- verdict v's), or extends the hold of a tripped one.
local function trip(f, t, reason, v)
  full(f)
  if not f.tripped then
    f.w, f.tripped, f.reason = prune(f.w, t, HOUR, true), true, reason
    v.trip = change(f)
  end
  f.since, f.sinces = t, f.ts
end

-- hold holds the restart of key (record r) for cause (nil: the breaker's),
-- waiting wait ns in v: the next in {p}:held's order.
local function hold(f, key, r, v, cause, wait)
  full(f)
  f.holds = f.holds + 1
  r.held, r.rel, v.held, v.wait = f.holds, false, 1, wait
  if cause then r.cause, v.cause = cause, cause end
  redis.call('ZADD', tag .. 'held', f.holds, key)
  redis.call('PERSIST', tag .. 'held')
end

-- release lets the restarts held for cause ('': the breaker's) leave in the
-- order they were held, from f's time one gap of span ns apart, each its
-- record written with ttl, and returns how many; held counts the others.
local function release(f, cause, span, ttl)
  local out, held = {}, 0
  for _, key in ipairs(redis.call('ZRANGE', tag .. 'held', 0, -1)) do
    local rk = tag .. 'k:' .. key
    local v = redis.call('GET', rk)
    local r = rdec(v)
    if not v then
      redis.call('ZREM', tag .. 'held', key)
    elseif r.cause == cause then
      out[#out + 1] = {rk, r}
    else
      held = held + 1
    end
  end
  local gap = math.floor(span / math.max(#out, 1))
  for i, h in ipairs(out) do
    h[2].cause, h[2].rel = '', {at = f.ts, off = string.format('%d', (i - 1) * gap)}
    rsave(h[1], h[2], ttl)
  end
  RECORD = nil -- the record read ahead may be one of them: read again
  return #out, held
end

-- rearm re-arms the tripped breaker whose cooldown ended at t, clearing the
-- hour, and releases the held restarts in order, spread evenly over one
-- cooldown (rules.rearm). It returns the change, or false.
local function rearm(f, t)
  if not f.tripped or t - f.since < C.cooldown_us then return false end
  f.tripped, f.w = false, ''
  local _, others = release(f, '', C.cooldown_ns, 'keep')
  if others == 0 then redis.call('PEXPIRE', tag .. 'held', C.fleet_ttl_ms) end
  return change(f)
end

-- untilRearm is the wait (ns, at least 1) from t until the breaker re-arms.
local function untilRearm(f, t)
  return math.max(1, C.cooldown_ns - (t - f.since) * 1000)
end

-- The hold on a shared cause (cause.go) keeps {p}:causes, a hash: '.' the
-- table, its format ('1': another fails the step, crashloop: record_format),
-- then per cause in the order first noted: held ('1' or '0'), its last
-- failure, its probe slot's time (a probe may go probe_every_ns after it)
-- and its prober's start (16 digits each), the cause and the prober as
-- fields; 'c:' and a cause: its keys' latest failures, oldest first (16
-- digits, the key as a field). It never expires while a cause is held.
-- cload reads the table once a step.
local function cread(v, i) -- the field of v at i, and where the next starts
  local colon = string.find(v, ':', i, true)
  local e = colon + tonumber(string.sub(v, i, colon - 1))
  return string.sub(v, colon + 1, e), e + 1
end
local function cload()
  if CS then return CS end
  local v, i = redis.call('HGET', tag .. 'causes', '.'), 2
  if v and string.byte(v) ~= 49 then error(redis.error_reply('crashloop: record_format')) end
  CS = {}
  while v and i <= #v do
    local c = {held = string.byte(v, i) == 49, last = tonumber(string.sub(v, i + 1, i + 16)),
      slot = tonumber(string.sub(v, i + 17, i + 32)), probed = tonumber(string.sub(v, i + 33, i + 48))}
    c.cause, i = cread(v, i + 49)
    c.prober, i = cread(v, i)
    CS[#CS + 1] = c
  end
  return CS
end
local function csave()
  local out, held = {'1'}, false
  for _, c in ipairs(CS) do
    held = held or c.held
    out[#out + 1] = (c.held and '1' or '0') .. string.format('%016d%016d%016d', c.last, c.slot, c.probed) ..
      field(c.cause) .. field(c.prober)
  end
  redis.call('HSET', tag .. 'causes', '.', table.concat(out))
  if held then redis.call('PERSIST', tag .. 'causes') else redis.call('PEXPIRE', tag .. 'causes', C.fleet_ttl_ms) end
end
local function cfind(cause)
  for i, c in ipairs(cload()) do
    if c.cause == cause then return c, i end
  end
end

-- untilProbe is the wait (ns, at least 1) of a restart held for c at t: until
-- the next probe may go, or the probe under way has run healthy_ns.
local function untilProbe(c, t)
  local w = (c.slot - t) * 1000 + C.probe_every_ns
  if c.prober ~= '' and C.healthy_ns > 0 then w = math.min(w, (c.probed - t) * 1000 + C.healthy_ns) end
  return math.max(w, 1)
end

-- releaseCause is rules.release at t, for the run of key (false: none):
-- a run not healthy ends its probe; the first cause whose prober's run was
-- healthy, else whose prober went healthy_ns ago, is released (its held
-- restarts leave over one probe_every_ns) and returned as a reply gives it.
local function releaseCause(f, t, key, healthy)
  local found, dirty
  for pass = 1, 2 do
    for _, c in ipairs(cload()) do
      if pass == 1 and key and not healthy and c.prober == key then c.prober, dirty = '', true end
      if not found and c.held and c.prober ~= '' and (pass == 1 and healthy and c.prober == key or
        pass == 2 and C.healthy_ns > 0 and (t - c.probed) * 1000 >= C.healthy_ns) then found = c end
    end
  end
  if found then
    local n = release(f, found.cause, C.probe_every_ns, C.record_ttl_ms)
    redis.call('HDEL', tag .. 'causes', 'c:' .. found.cause)
    found.held, found.prober, found.slot, found.probed, dirty = false, '', 0, 0, true
    found = {'cause', found.cause, 'keys', n}
  end
  if dirty then csave() end
  return found or false
end

-- holdCause notes at t the failure of key (record r) with the shared cause
-- A.shared (causeBook.note), and holds its restart if the cause is held or
-- now has cause_keys keys (rules.holdCause); it reports whether it held it.
local function holdCause(f, t, key, r, v)
  local c = cfind(A.shared)
  if not c then
    if #CS >= 64 then -- the table is full: the oldest cause not held goes
      local drop
      for i, o in ipairs(CS) do drop = not o.held and (not drop or o.last < CS[drop].last) and i or drop end
      if not drop then return false end
      redis.call('HDEL', tag .. 'causes', 'c:' .. table.remove(CS, drop).cause)
    end
    c = {cause = A.shared, held = false, slot = 0, probed = 0, prober = ''}
    CS[#CS + 1] = c
  end
  c.last = t
  local w, notes, i = redis.call('HGET', tag .. 'causes', 'c:' .. c.cause) or '', {}, 1
  while i <= #w do
    local from, k = i
    k, i = cread(w, i + 16)
    if k ~= key and (t - tonumber(string.sub(w, from, from + 15))) * 1000 <= C.cause_window_ns then
      notes[#notes + 1] = string.sub(w, from, i - 1)
    end
  end
  while #notes >= C.cause_keys do table.remove(notes, 1) end
  notes[#notes + 1] = f.ts .. field(key)
  redis.call('HSET', tag .. 'causes', 'c:' .. c.cause, table.concat(notes))
  local held = c.held or #notes >= C.cause_keys
  if held and not c.held then
    c.held, c.slot, c.prober = true, t, ''
    v.causeHeld = {'cause', c.cause, 'keys', #notes}
  end
  csave()
  if held then hold(f, key, r, v, c.cause, untilProbe(c, t)) end
  return held
end

-- probeWait is the wait (ns) at t until the next probe of the parked key of
-- r: its interval started at r.probe; the first is probe_after_ns, the next
-- after p probes min(probe_after_ns << p, probe_max_ns), at least healthy_ns.
local function probeWait(r, t)
  local every = r.probes < 32 and math.min(C.probe_after_ns * 2 ^ r.probes, C.probe_max_ns) or C.probe_max_ns
  return (r.probe - t) * 1000 + (r.probes == 0 and C.probe_after_ns or math.max(every, C.healthy_ns))
end

-- begin starts a judge or proceed step (rules.rearm, rules.release) for the
-- run of the record's key (false: none) that was healthy or not: the fleet
-- string, the step's time, the key, the verdict so far and the record (its
-- value and r). On an untripped string of this limit, a judge keeps f.mid
-- unread until a park or a trip needs it (full).
local function begin(run, healthy)
  local f, re = fload(), false
  if string.byte(f.mid, 1) ~= 48 or (op ~= 'judge' and C.fleet_per_hour > 0) or
    string.sub(f.mid, 18, 17 + #C.limit) ~= C.limit then
    full(f)
    re = C.fleet_per_hour > 0 and rearm(f, at(f))
    f.rph, f.cdns = C.rph, C.cdns
  end
  local t, key = at(f), keyOf(K1)
  local v = {re = re, t = t}
  if C.cause_keys > 0 then v.rel = releaseCause(f, t, run and key, healthy) end
  local rv = RECORD == nil and redis.call('GET', K1) or RECORD
  return f, t, key, v, rv, rdec(rv)
end

-- verdict is the reply of a judge or proceed step on key at v.t: new_park,
-- held, wait_ns and probe only when not 0; probe_ns, the wait until the
-- park's next probe, while one is scheduled.
local function verdict(key, r, v)
  local out = {'now', now, 'attempt', v.attempt or 0, 'restarts', r.n}
  add(out, 'new_park', v.newPark)
  if v.held then add(out, 'held', 1) add(out, 'wait_ns', v.wait) end
  add(out, 'park', r.p and parkObject(key, r.p))
  add(out, 'tripped', v.trip)
  add(out, 'rearmed', v.re)
  add(out, 'cause', v.cause)
  add(out, 'cause_held', v.causeHeld)
  add(out, 'cause_released', v.rel)
  add(out, 'probe', v.probe)
  add(out, 'probe_ns', r.p and r.probe and probeWait(r, v.t))
  return out
end

-- fleetKeys counts the live keys (in some live replica's members, once
-- each) and the failing ones (live and parked), both without skip; prune
-- drops the replicas whose members expired. O(members): parks and status.
local function fleetKeys(skip, prune)
  local live, total, failing = {}, 0, 0
  for _, name in ipairs(redis.call('SMEMBERS', tag .. 'replicas')) do
    local ms = redis.call('SMEMBERS', tag .. 'm:' .. name)
    if #ms == 0 and prune then
      redis.call('SREM', tag .. 'replicas', name)
    end
    for _, key in ipairs(ms) do
      if key ~= skip and not live[key] then
        live[key] = true
        total = total + 1
        if redis.call('SISMEMBER', tag .. 'parked', key) == 1 then failing = failing + 1 end
      end
    end
  end
  return total, failing
end

-- move moves the deployment to a new epoch (the server lost versions the
-- caller saw), so that every replica writes back its parks: {p}:seq above
-- every version seen; the keys' versions dropped (a write-back names 0);
-- each park standing takes a new version, published in the new epoch.
local function move()
  A.epoch = 'failover-' .. A.fresh
  redis.call('SET', tag .. 'epoch', A.epoch)
  redis.call('SET', tag .. 'seq', string.format('%d', math.max(tonumber(A.seen), tonumber(A.floor))))
  redis.call('DEL', tag .. 'ver')
  parks(function(key, rk, r) rewrite(rk, key, r, r.p, 'failover') end)
  return {'epoch', A.epoch}
end

-- main runs one step. The state check first: {p}:epoch names the
-- deployment's state, and a step of another epoch (the server lost its
-- state) fails, changing nothing, with 'crashloop: state_lost EPOCH'; a
-- judging step that finds no configuration fails with 'crashloop:
-- no_config' (its Store writes it and sends the step again). The op epoch
-- returns the epoch (making it if there is none), and moves the deployment
-- when {p}:seq is below seen; seen and floor raise {p}:seq.
local function main(ks, av)
  keys, argv, op, K1 = ks, av, av[1], ks[1]
  tag = string.match(K1 or '', '^{[^}]*}:')
  C, FLEET, RECORD, CS, now, nows = nil, nil, nil, nil, nil, nil
  local spec = SPEC[op]
  if not spec then return redis.error_reply('crashloop: unknown operation ' .. tostring(op)) end
  local n = #spec / 2
  A = {epoch = argv[2]}
  if #argv < n + 2 or (#argv > n + 2 and op ~= 'restore' and op ~= 'members') then
    return redis.error_reply('crashloop: ' .. op .. ': ' .. (#argv - 1) .. ' arguments, want ' .. (n + 1))
  end
  for i = 1, n do
    local name, kind, v = spec[2 * i - 1], spec[2 * i], argv[i + 2]
    if kind == 'n' then
      v = tonumber(v)
    elseif (kind == 'd' and not string.match(v, '^%d+$')) or (kind == 't' and v ~= '' and not string.match(v, T16)) then
      v = nil
    end
    if v == nil then
      return redis.error_reply('crashloop: ' .. op .. ': argument ' .. name .. ': ' .. argv[i + 2] .. ' is not a ' ..
        KINDS[kind])
    end
    A[name] = v
  end
  local judges, cur, cfg = op == 'judge' or op == 'proceed' or op == 'fleet'
  if judges then -- with the fleet string and the record, read ahead (fload, judge, proceed)
    local got = redis.call('MGET', tag .. 'epoch', keys[#keys], tag .. 'fleet', K1)
    cur, cfg, FLEET, RECORD = got[1], got[2], got[3], got[4]
  else
    cur = redis.call('GET', tag .. 'epoch')
  end
  if op == 'epoch' then
    if not cur then
      cur = A.fresh
      redis.call('SET', tag .. 'epoch', cur)
    end
    if cur ~= A.epoch then return {'epoch', cur} end
    local seq = tonumber(redis.call('GET', tag .. 'seq') or '0')
    if seq < tonumber(A.floor) then
      seq = tonumber(A.floor)
      redis.call('SET', tag .. 'seq', A.floor)
    end
    if seq >= tonumber(A.seen) then return {'epoch', cur} end
    return move()
  elseif cur ~= A.epoch then
    return redis.error_reply('crashloop: state_lost ' .. (cur or ''))
  elseif judges then
    if not cfg then return redis.error_reply('crashloop: no_config') end
    C = readConfig(cfg)
    if not C then return redis.error_reply('crashloop: ' .. op .. ': not a configuration of format 2') end
  elseif op == 'config' then
    if not readConfig(A.config) then return redis.error_reply('crashloop: config: not a configuration of format 2') end
    redis.call('SET', K1, A.config)
    return {'written', 1}
  end

  nows = A.now
  if nows == '' then
    local tm = redis.call('TIME') -- seconds (10 digits until 2286) and microseconds
    nows = tm[1] .. string.sub('00000' .. tm[2], -6)
  end
  now = nows and tonumber(nows)

  if op == 'judge' then -- keys: record, fleet, parked, held, causes, configuration (rules.judge)
    local ending = A.ending
    if not ENDINGS[ending] then return redis.error_reply('crashloop: judge: argument ending: unknown ending ' .. ending) end
    local healthy, inc = A.healthy == 1, A.incarnation
    local f, t, key, v, _, r = begin(true, healthy)
    if not r.p then
      if healthy or ending == 'clean' then
        r.b = '' -- a healthy run, or one that finished its work, was a good start
      end
      if ending == 'clean' then
        r.g = '' -- a clean run clears the fast guard
      elseif C.cause_keys > 0 and A.shared ~= '' and (ending == 'failed_start' or ending == 'crash') and
        holdCause(f, t, key, r, v) then
        -- held for its cause: nothing counted
      else
        local reason, n, chain = nil, nil, 0 -- the reason to park, after n counted
        if C.chain_max > 0 and r.c and r.c.inc == inc and t - tonumber(r.c.last) <= C.chain_gap_us then
          chain = r.c.count
        end
        if ending == 'permanent' or ending == 'failed_start' then
          r.b = prune(r.b, t, C.budget_window_us)
          n = #r.b / 16
          reason = ending == 'permanent' and 'permanent_error' or n >= C.budget_max and 'respawn_budget_exhausted'
        elseif ending == 'crash' and C.chain_max > 0 and chain >= C.chain_max then
          reason, n = 'needs_human', chain
        end
        if not reason and C.guard_max > 0 then
          r.g = prune(r.g, t, C.guard_window_us)
          n = #r.g / 16
          if n >= C.guard_max then reason = 'restart_loop_guard' end
        end
        if not reason and C.hourly_cap > 0 then
          r.h = prune(r.h, t, HOUR)
          n = #r.h / 16
          if n >= C.hourly_cap then reason = 'hourly_restart_cap' end
        end
        if reason then
          -- the park: no restart recorded; the fleet judges its fraction
          r.p = {since = nows, attempts = string.format('%d', n), reason = reason, cause = A.cause, version = bump(key)}
          if r.held ~= 0 then redis.call('ZREM', keys[4], key) end
          r.held, r.rel, r.cause, r.probes, r.probe = 0, false, '', 0, C.probe_after_ns > 0 and
            reason ~= 'permanent_error' and reason ~= 'needs_human' and t
          v.newPark = 1
          if C.fleet_per_hour > 0 then
            full(f)
            local tm, tf = fleetKeys(key, true)
            local total, fl = tm + 1, tf + 1
            f.failing, f.total = fl, total
            if fl >= C.min_failing and fl / total >= C.fraction then trip(f, t, 'fleet_failing_fraction', v) end
          end
          redis.call('SADD', keys[3], key)
          notice(A.origin, key, r.p)
        else
          if ending == 'failed_start' then
            r.b = r.b .. f.ts
            v.attempt = #r.b / 16
          elseif (ending == 'crash' or ending == 'planned') and C.chain_max > 0 and chain < C.chain_max then
            r.c = false -- a planned restart ends the chain
            if ending == 'crash' then r.c = {last = f.ts, count = chain + 1, inc = inc} end
          end
          if C.guard_max > 0 then r.g = push(r.g, f.ts, C.guard_max) end
          if C.hourly_cap > 0 then r.h = push(r.h, f.ts, C.hourly_cap) end
          r.n = r.n + 1
          local rph = C.fleet_per_hour
          if rph > 0 and not f.tripped then
            f.w = push(prune(f.w, t, HOUR, true), struct.pack('>i8', t), rph)
            if #f.w / 8 >= rph then trip(f, t, 'fleet_restart_rate', v) end
          end
          if rph > 0 and f.tripped then -- held: not counted, released in order at the re-arm
            hold(f, key, r, v, nil, untilRearm(f, t))
          end
        end
      end
      rsave(K1, r, C.record_ttl_ms)
    end
    fsave(f, C.fleet_ttl_ms)
    return verdict(key, r, v)
  end

  if op == 'proceed' then -- keys: record, fleet, held, causes, configuration (rules.proceed)
    local f, t, key, v, rv, r = begin(false, false)
    fsave(f, C.fleet_ttl_ms)
    if r.p and r.probe and probeWait(r, t) <= 0 then -- the park's probe is due: claimed
      r.probes, r.probe, v.probe = r.probes + 1, t, 1
      rsave(K1, r, 'keep')
    end
    if not rv or r.p or r.held == 0 then return verdict(key, r, v) end
    local c = r.cause ~= '' and cfind(r.cause)
    local go, ttl = false, 'keep' -- whether the held restart goes, and its record's TTL then
    if c and c.held and (t - c.slot) * 1000 < C.probe_every_ns then
      v.held, v.cause, v.wait = 1, c.cause, untilProbe(c, t)
    elseif c and c.held then -- the cause's probe: it goes
      c.slot, c.prober, c.probed, v.probe = t, key, t, 1
      csave()
      go, ttl = true, C.record_ttl_ms
    else
      if r.cause ~= '' then -- its cause is no longer held
        r.cause = ''
        rsave(K1, r, C.record_ttl_ms)
      end
      -- the release: the re-arm's time plus the restart's offset
      local left = r.rel and (tonumber(r.rel.at) - t) * 1000 + tonumber(r.rel.off) or 0
      if C.fleet_per_hour > 0 and f.tripped then
        v.held, v.wait = 1, untilRearm(f, t)
      elseif left > 0 then
        v.held, v.wait = 1, left
      else
        go = true
      end
    end
    if go then
      r.held, r.rel, r.cause = 0, false, ''
      redis.call('ZREM', keys[3], key)
      rsave(K1, r, ttl)
    end
    return verdict(key, r, v)
  end

  if op == 'fleet' or op == 'fleet_read' then
    -- keys: fleet, causes (and the configuration for 'fleet', an opened Store's, which
    -- raises the latest time and writes its limit; 'fleet_read' only reads).
    -- The breaker at t as a re-arm (not made) would leave it; the causes held.
    local f = fload()
    full(f)
    local t = at(f)
    if op == 'fleet' then
      f.rph, f.cdns = C.rph, C.cdns
      fsave(f, C.fleet_ttl_ms)
    end
    local tripped, w = f.tripped, f.w
    if tripped and (t - f.since) * 1000 >= tonumber(f.cdns) then tripped, w = false, '' end
    local total, failing = fleetKeys('', false)
    local held = {}
    for _, c in ipairs(cload()) do
      if c.held then held[#held + 1] = c.cause end
    end
    return {'tripped', tripped and 1 or 0, 'since', f.since, 'failing', failing, 'total', total,
      'hour', #prune(w, t, HOUR, true) / 8, 'per_hour', tonumber(f.rph), 'cooldown_ns', tonumber(f.cdns), 'now', now,
      'held_causes', held}
  end

  if op == 'lookup' then -- keys: record
    return stands(keyOf(K1), rdec(redis.call('GET', K1)))
  end

  if op == 'resume' or op == 'forget' then
    -- keys: record, parked, held. Applied only at the version named (the
    -- park's for a resume, the key's for a forget), else the key as it stands.
    local key = keyOf(K1)
    local r = rdec(redis.call('GET', K1))
    local named = tonumber(A.version)
    if (op == 'resume' and (not r.p or tonumber(r.p.version) ~= named)) or (op == 'forget' and version(key) ~= named) then
      return stands(key, r, 'applied', 0)
    end
    redis.call('DEL', K1)
    redis.call('ZREM', keys[3], key)
    local v = bump(key)
    local out = {'applied', 1, 'version', tonumber(v)}
    if r.p then
      redis.call('SREM', keys[2], key)
      notice(A.origin, key, false, v, op == 'forget' and 'F' or 'R')
      add(out, 'park', parkObject(key, r.p))
    end
    return out
  end

  if op == 'restore' then
    -- keys: parked, then the record of each park. A park is written (with the
    -- next version) only over a key not parked still at the version named.
    if #argv - 4 ~= #keys - 1 then
      return redis.error_reply('crashloop: restore: ' .. (#argv - 4) .. ' parks for ' .. (#keys - 1) .. ' keys')
    end
    local out = {}
    for i = 2, #keys do
      local key = keyOf(keys[i])
      local r, p = rdec(redis.call('GET', keys[i])), pdec(argv[i + 3])
      local written = 0
      if not r.p and version(key) == tonumber(p.version) then
        redis.call('SADD', K1, key)
        rewrite(keys[i], key, r, p, A.origin)
        written = 1
      end
      out[#out + 1] = stands(key, r, 'written', written)
    end
    return out
  end

  if op == 'claim' then
    -- keys: the claim. The first to claim a transition wins it, and wins again
    -- (a claim whose reply was lost is sent again); every other loses.
    if A.replica == '' then return redis.error_reply('crashloop: claim: an empty replica') end
    if tonumber(A.version) > tonumber(redis.call('GET', tag .. 'seq') or '0') then
      return {'won', 0} -- a version the server never gave (lost with its claim): nobody wins
    end
    local holder = redis.call('GET', K1)
    if not holder then
      redis.call('SET', K1, A.replica, 'EX', CLAIM_TTL)
      holder = A.replica
    end
    return {'won', holder == A.replica and 1 or 0}
  end

  if op == 'parked' then -- keys: parked
    local out = {}
    parks(function(key, _, r) out[#out + 1] = parkObject(key, r.p) end)
    return out
  end

  -- op == 'members'. keys: the replica's members, replicas. With full the set
  -- becomes the keys added; else they and the removed change it if it holds
  -- expect keys (else the Store writes it whole). It expires ttl_ms after its
  -- last write; {p}:replicas lists the replicas whose set holds keys.
  local nadd = tonumber(A.nadd)
  if nadd > #argv - 7 then
    return redis.error_reply('crashloop: members: ' .. nadd .. ' keys added of ' .. (#argv - 7))
  end
  local n = redis.call('SCARD', K1)
  if A.full == 1 then
    redis.call('DEL', K1)
  elseif n ~= A.expect then
    return {'applied', 0, 'count', n}
  end
  for _, change in ipairs({{'SADD', 8, 7 + nadd}, {'SREM', 8 + nadd, #argv}}) do
    for i = change[2], change[3], 1000 do -- unpack has a limit
      redis.call(change[1], K1, unpack(argv, i, math.min(i + 999, change[3])))
    end
  end
  n = redis.call('SCARD', K1)
  if n > 0 then
    redis.call('PEXPIRE', K1, A.ttl_ms)
    redis.call('SADD', keys[2], A.replica)
    if redis.call('PTTL', keys[2]) < tonumber(A.ttl_ms) then
      redis.call('PEXPIRE', keys[2], A.ttl_ms)
    end
  else
    redis.call('SREM', keys[2], A.replica)
  end
  return {'applied', 1, 'count', n}
end

-- Run as a script; loaded as a library, script.go registers main (FCALL).
if not redis.register_function then return main(KEYS, ARGV) end
