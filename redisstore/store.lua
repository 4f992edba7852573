-- crashloop's share.Ledger on Redis: each Store method is one call of main,
-- one atomic step. Its specification is the Go judgment (rules.judge and
-- rules.proceed in judge.go, with fleet.go, budget.go, chain.go, guard.go,
-- probe.go, cause.go) as share.MemoryLedger runs it: share/ledgertest's
-- differential runs hold the two equal at the server's time and with
-- ClientTime. docs/redis.md tells the keys, calls, replies and formats.
-- Times are integer microseconds since 1970, 16 digits ('' for the server's
-- TIME); one earlier than the deployment's latest ({p}:fleet) reads as it.

local HOUR = 3600000000 -- the fleet's rolling hour, in microseconds
local CLAIM_TTL = 86400 -- how long a claim is kept, in seconds: a day
local ZERO = '0000000000000000' -- the time 0, 16 digits
local D16 = '%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d' -- a time's pattern
-- A call's own, set by main at each call (a library's locals outlive calls).
local keys, argv, op, K1, tag, A, C, now, nows, FLEET, RECORD, CS

-- SPEC: each op's arguments after the epoch, a name and a kind each ('d'
-- digits kept as text; 't' '' or 16 digits). restore and members take more.
local SPEC = {judge = {'now', 't', 'ending', 's', 'healthy', 'n', 'incarnation', 's', 'cause', 's', 'shared', 's',
  'origin', 's'}, proceed = {'now', 't'}, fleet = {'now', 't'}, fleet_read = {'now', 't'}, lookup = {}, parked = {},
  resume = {'origin', 's', 'version', 'd'}, forget = {'origin', 's', 'version', 'd'},
  claim = {'version', 'd', 'replica', 's'}, restore = {'origin', 's', 'replica', 's'},
  members = {'replica', 's', 'ttl_ms', 'd', 'full', 'n', 'expect', 'n', 'nadd', 'd'},
  epoch = {'fresh', 's', 'seen', 'd', 'floor', 'd'}, config = {'config', 's'}}
local KINDS = {n = 'number', d = 'whole number', t = "time ('' or 16 digits)"}
local ENDINGS = {clean = true, permanent = true, failed_start = true, crash = true, planned = true}

-- readConfig returns configuration v (docs/redis.md: 21 8-byte numbers of
-- format 2; 0 turns a guard off) read, or false; a library keeps up to 64.
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

-- prune returns window w (oldest first: 16 digits a time, or 4 bytes: mod 2^32,
-- up to ref) without times older than span at t; push adds ts, keeping limit.
local function prune(w, t, span, ref)
  local i, n = 1, #w
  while i <= n and
    t - (ref and ref - (ref - struct.unpack('>I4', w, i)) % 2^32 or tonumber(string.sub(w, i, i + 15))) > span do
    i = i + (ref and 4 or 16)
  end
  return i > 1 and string.sub(w, i) or w
end
local function push(w, ts, limit)
  w = w .. ts
  if #w > limit * #ts then w = string.sub(w, #w - limit * #ts + 1) end
  return w
end

-- field writes s as its length, ':', s; unfield returns the field of v at i
-- and where the next starts; add adds name, value to a reply if there is value.
local function field(s)
  return #s .. ':' .. s
end
local function unfield(v, i)
  local colon = string.find(v, ':', i, true)
  local e = colon + tonumber(string.sub(v, i, colon - 1))
  return string.sub(v, colon + 1, e), e + 1
end
local function add(out, name, value)
  if value then out[#out + 1], out[#out + 2] = name, value end
end

-- A park (pdec, penc; in restore, its version is the one its replica knew).
local function pdec(p)
  local comma = string.find(p, ',', 17, true)
  local comma2 = string.find(p, ',', comma + 1, true)
  local reason, i = unfield(p, comma2 + 1)
  return {since = string.sub(p, 1, 16), attempts = string.sub(p, 17, comma - 1),
    version = string.sub(p, comma + 1, comma2 - 1), reason = reason, cause = string.sub(p, i)}
end
local function penc(p)
  return p.since .. p.attempts .. ',' .. p.version .. ',' .. field(p.reason) .. p.cause
end

-- bump gives key the next version of {p}:seq and returns it, as a string;
-- version returns the version of key, a number (0: none).
local function bump(key)
  local v = redis.call('INCR', tag .. 'seq')
  redis.call('HSET', tag .. 'ver', key, v)
  return string.format('%d', v)
end
local function version(key)
  return tonumber(redis.call('HGET', tag .. 'ver', key) or '0')
end

-- A record (rdec, renc): the header REC, then its parts. r.held is the order
-- it was held in (0: not held), r.probe its park's probe interval's start.
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
    local colon = string.find(v, ':', i + 16, true)
    r.c = {last = string.sub(v, i, i + 15), count = tonumber(string.sub(v, i + 16, colon - 1)),
      inc = string.sub(v, colon + 1, i + lc - 1)}
  end
  i = i + lc
  if lp > 0 then r.p = pdec(string.sub(v, i, i + lp - 1)) end
  i = i + lp
  if lr > 0 then r.rel = {at = string.sub(v, i, i + 15), off = string.sub(v, i + 16, i + lr - 1)} end
  if lk > 0 then r.cause = string.sub(v, i + lr, i + lr + lk - 1) end
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
-- else ttl ms from now ('keep': the expiry it has).
local function rsave(key, r, ttl)
  if r.p or r.cause ~= '' then
    redis.call('SET', key, renc(r))
  elseif ttl == 'keep' then
    redis.call('SET', key, renc(r), 'KEEPTTL')
  else
    redis.call('SET', key, renc(r), 'PX', ttl)
  end
end

-- keyOf is the library's key of record key rk; parkObject is park p of key as
-- a reply gives it; stands, key (record r) after flag and value: version, park.
local function keyOf(rk)
  return string.sub(rk, #tag + 3)
end
local function parkObject(key, p)
  return {'key', key, 'reason', p.reason, 'attempts', tonumber(p.attempts), 'since', tonumber(p.since),
    'cause', p.cause, 'version', tonumber(p.version)}
end
local function stands(key, r, flag, value)
  local out = flag and {flag, value} or {}
  add(out, 'version', version(key))
  add(out, 'park', r.p and parkObject(key, r.p))
  return out
end

-- notice publishes (SPUBLISH: on the slot's node) a park p of key ('P'), or
-- its resume or forget (kind 'R' or 'F') at version v.
local function notice(origin, key, p, v, kind)
  local head = field(A.epoch) .. field(origin) .. field(key)
  redis.call('SPUBLISH', tag .. 'events', p and 'P' .. head .. penc(p) or kind .. head .. v)
end
-- rewrite gives park p of key (record r at rk) the next version, writes and
-- publishes it, claimed by '' (no claimer's): its writer announced it, if any.
local function rewrite(rk, key, r, p, origin)
  p.version = bump(key)
  redis.call('SET', tag .. 'claim:' .. p.version, '', 'EX', CLAIM_TTL)
  r.p = p
  rsave(rk, r, 'keep')
  notice(origin, key, p)
end
-- parks calls each(key, rk, r) for each parked key, dropping the others.
local function parks(each)
  for _, key in ipairs(redis.call('SMEMBERS', tag .. 'parked')) do
    local rk = tag .. 'k:' .. key
    local r = rdec(redis.call('GET', rk))
    if r.p then each(key, rk, r) else redis.call('SREM', tag .. 'parked', key) end
  end
end

-- The fleet string: fload splits it into the latest time, mid (the breaker's
-- fields, as text) and the packed hour; full reads mid; fsave writes it.
local NOFLEET = '\3' .. ZERO .. '0' .. ZERO .. '0,0,0,0,0,\n'
local HEAD, MID = '^' .. D16 .. '$', '^(.)(' .. D16 .. ')(%d+),(%d+),(%d+),(%d+),(%d+),([^\n]*)\n$'
local function fload()
  local v = FLEET == nil and redis.call('GET', tag .. 'fleet') or FLEET or NOFLEET
  local nl = string.find(v, '\n', 35, true)
  if not nl or string.byte(v, 1) ~= 3 then error(redis.error_reply('crashloop: fleet_format')) end
  local ts = string.sub(v, 2, 17)
  return {ts = ts, t = tonumber(ts), mid = string.sub(v, 18, nl), w = string.sub(v, nl + 1)}
end
local function full(f)
  if not f.mid then return end
  local flag, sinces, rph, cdns, holds, failing, total, reason = string.match(f.mid, MID)
  if not flag or not string.find(f.ts, HEAD) then error(redis.error_reply('crashloop: fleet_format')) end
  f.tripped, f.since, f.sinces, f.rph, f.cdns, f.holds, f.failing, f.total, f.reason, f.mid =
    flag == '1', tonumber(sinces), sinces, rph, cdns, holds, failing, total, reason, nil
end
local function fsave(f, ttl) -- no expiry while tripped, else ttl ms
  local mid = f.mid or (f.tripped and '1' or '0') .. f.sinces .. f.rph .. ',' .. f.cdns .. ',' .. f.holds .. ',' ..
    f.failing .. ',' .. f.total .. ',' .. f.reason .. '\n'
  local v = '\3' .. f.ts .. mid .. f.w
  if f.tripped then
    redis.call('SET', tag .. 'fleet', v)
  else
    redis.call('SET', tag .. 'fleet', v, 'PX', ttl)
  end
end

-- at raises the latest time to now, prunes the hour, and returns the step's
-- time, the later; change is the breaker's FleetChange as a reply gives it.
local function at(f)
  f.w = prune(f.w, math.max(now, f.t), HOUR, f.t)
  if now > f.t then f.t, f.ts = now, nows end
  return f.t
end
local function change(f)
  return {'reason', f.reason, 'restarts', #f.w / 4, 'failing', tonumber(f.failing), 'total', tonumber(f.total)}
end

-- trip trips the breaker at t for reason (the change v's), or extends the
-- hold of a tripped one; hold holds the restart of key (record r) for cause
-- (nil: the breaker's), waiting wait ns: the next in {p}:held's order.
local function trip(f, t, reason, v)
  full(f)
  if not f.tripped then
    f.tripped, f.reason = true, reason
    v.tripped = change(f)
  end
  f.since, f.sinces = t, f.ts
end
local function hold(f, key, r, v, cause, wait)
  full(f)
  f.holds = f.holds + 1
  r.held, r.rel, v.held, v.wait_ns = f.holds, false, 1, wait
  if cause then r.cause, v.cause = cause, cause end
  redis.call('ZADD', tag .. 'held', f.holds, key)
  redis.call('PERSIST', tag .. 'held')
end

-- release lets the restarts held for cause ('': the breaker's) leave in order,
-- span ns apart from f's time, written with ttl; it returns how many, and held.
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

-- rearm re-arms the breaker whose cooldown ended at t, clearing the hour, and
-- releases the held restarts over one cooldown; it returns the change, or
-- false. untilRearm is the wait (ns, at least 1) until the breaker re-arms.
local function rearm(f, t)
  if not f.tripped or t - f.since < C.cooldown_us then return false end
  f.tripped, f.w = false, ''
  local _, others = release(f, '', C.cooldown_ns, 'keep')
  if others == 0 then redis.call('PEXPIRE', tag .. 'held', C.fleet_ttl_ms) end
  return change(f)
end
local function untilRearm(f, t)
  return math.max(1, C.cooldown_ns - (t - f.since) * 1000)
end

-- The hold on a shared cause: cload reads {p}:causes' cause table once a step,
-- cfind finds a cause in it, csave writes it.
local function cload()
  if CS then return CS end
  local v, i = redis.call('HGET', tag .. 'causes', '.'), 2
  if v and string.byte(v) ~= 49 then error(redis.error_reply('crashloop: record_format')) end
  CS = {}
  while v and i <= #v do
    local c = {held = string.byte(v, i) == 49, last = tonumber(string.sub(v, i + 1, i + 16)),
      slot = tonumber(string.sub(v, i + 17, i + 32)), probed = tonumber(string.sub(v, i + 33, i + 48))}
    c.cause, i = unfield(v, i + 49)
    c.prober, i = unfield(v, i)
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
  for _, c in ipairs(cload()) do if c.cause == cause then return c end end
end

-- untilProbe is the wait (ns, at least 1) of a restart held for c at t: until
-- the next probe may go, or the probe under way has run healthy_ns.
local function untilProbe(c, t)
  local w = (c.slot - t) * 1000 + C.probe_every_ns
  if c.prober ~= '' and C.healthy_ns > 0 then w = math.min(w, (c.probed - t) * 1000 + C.healthy_ns) end
  return math.max(w, 1)
end

-- releaseCause is rules.release at t, for the run of key (false: none): a
-- run not healthy ends its probe; the first cause whose prober's run was
-- healthy, else whose prober went healthy_ns ago, is released and returned.
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

-- holdCause notes at t the failure of key (record r) with cause A.shared and
-- holds its restart if the cause is or now gets held (rules.holdCause).
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
    k, i = unfield(w, i + 16)
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
    v.cause_held = {'cause', c.cause, 'keys', #notes}
  end
  csave()
  if held then hold(f, key, r, v, c.cause, untilProbe(c, t)) end
  return held
end

-- probeWait is the wait (ns) at t until parked record r's next probe: from
-- r.probe, probe_after_ns, then min(after << probes, max), at least healthy.
local function probeWait(r, t)
  local every = r.probes < 32 and math.min(C.probe_after_ns * 2 ^ r.probes, C.probe_max_ns) or C.probe_max_ns
  return (r.probe - t) * 1000 + (r.probes == 0 and C.probe_after_ns or math.max(every, C.healthy_ns))
end

-- begin starts a judge (of a run, healthy or not) or proceed step: the fleet
-- string (mid read if needed), the time, the key, the verdict and the record.
local function begin(run, healthy)
  local f, re = fload(), false
  if string.byte(f.mid, 1) ~= 48 or (op ~= 'judge' and C.fleet_per_hour > 0) or
    string.find(f.mid, C.limit, 18, true) ~= 18 then
    full(f)
    re = C.fleet_per_hour > 0 and rearm(f, at(f))
    f.rph, f.cdns = C.rph, C.cdns
  end
  local t, key = at(f), keyOf(K1)
  local v = {rearmed = re, t = t, attempt = 0}
  if C.cause_keys > 0 then v.cause_released = releaseCause(f, t, run and key, healthy) end
  local rv = RECORD == nil and redis.call('GET', K1) or RECORD
  return f, t, key, v, rv, rdec(rv)
end

-- verdict is the reply of a judge or proceed step on key at v.t: new_park,
-- held, wait_ns and probe only when not 0; probe_ns while a probe is due.
local VERDICT = {'new_park', 'held', 'wait_ns', 'park', 'tripped', 'rearmed', 'cause', 'cause_held', 'cause_released',
  'probe', 'probe_ns'}
local function verdict(key, r, v)
  local out = {'now', now, 'attempt', v.attempt, 'restarts', r.n}
  if r.p then v.park, v.probe_ns = parkObject(key, r.p), r.probe and probeWait(r, v.t) end
  for i = 1, #VERDICT do if v[VERDICT[i]] then out[#out + 1], out[#out + 2] = VERDICT[i], v[VERDICT[i]] end end
  return out
end

-- fleetKeys counts the live keys (in a live replica's members, once each) and
-- the failing ones, without skip; prune drops replicas whose members expired.
local function fleetKeys(skip, prune)
  local live, total, failing = {}, 0, 0
  for _, name in ipairs(redis.call('SMEMBERS', tag .. 'replicas')) do
    local ms = redis.call('SMEMBERS', tag .. 'm:' .. name)
    if #ms == 0 and prune then redis.call('SREM', tag .. 'replicas', name) end
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

-- park parks key (record r) at t for reason after n counted (rules.park):
-- no restart recorded; the fleet judges its failing fraction.
local function park(f, t, key, r, v, reason, n)
  r.p = {since = nows, attempts = string.format('%d', n), reason = reason, cause = A.cause, version = bump(key)}
  if r.held ~= 0 then redis.call('ZREM', tag .. 'held', key) end
  r.held, r.rel, r.cause, r.probes, r.probe = 0, false, '', 0, C.probe_after_ns > 0 and
    reason ~= 'permanent_error' and reason ~= 'needs_human' and t
  v.new_park = 1
  if C.fleet_per_hour > 0 then
    full(f)
    local total, failing = fleetKeys(key, true)
    f.total, f.failing = total + 1, failing + 1 -- the key parked counts
    if f.failing >= C.min_failing and f.failing / f.total >= C.fraction then trip(f, t, 'fleet_failing_fraction', v) end
  end
  redis.call('SADD', tag .. 'parked', key)
  notice(A.origin, key, r.p)
end

-- judge is rules.judge of the run A tells on key (record r, not parked) at t:
-- a park or a hold on a cause records no restart; a restart passes every guard.
local function judge(f, t, key, r, v)
  local ending, inc, chain = A.ending, A.incarnation, 0
  -- a healthy run, or one that finished its work, was a good start; a clean one clears the guard
  if A.healthy == 1 or ending == 'clean' then r.b = '' end
  if ending == 'clean' then r.g = '' return end
  local shared = C.cause_keys > 0 and A.shared ~= '' and (ending == 'failed_start' or ending == 'crash')
  if shared and holdCause(f, t, key, r, v) then return end
  if C.chain_max > 0 and r.c and r.c.inc == inc and t - tonumber(r.c.last) <= C.chain_gap_us then chain = r.c.count end
  if ending == 'permanent' or ending == 'failed_start' then
    r.b = prune(r.b, t, C.budget_window_us)
    local n = #r.b / 16
    if ending == 'permanent' then return park(f, t, key, r, v, 'permanent_error', n) end
    if n >= C.budget_max then return park(f, t, key, r, v, 'respawn_budget_exhausted', n) end
  elseif ending == 'crash' and C.chain_max > 0 and chain >= C.chain_max then
    return park(f, t, key, r, v, 'needs_human', chain)
  end
  if C.guard_max > 0 then
    r.g = prune(r.g, t, C.guard_window_us)
    if #r.g / 16 >= C.guard_max then return park(f, t, key, r, v, 'restart_loop_guard', #r.g / 16) end
  end
  if C.hourly_cap > 0 then
    r.h = prune(r.h, t, HOUR)
    if #r.h / 16 >= C.hourly_cap then return park(f, t, key, r, v, 'hourly_restart_cap', #r.h / 16) end
  end
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
  if C.fleet_per_hour > 0 and not f.tripped then
    f.w = push(f.w, struct.pack('>I4', t % 2^32), C.fleet_per_hour)
    if #f.w / 4 >= C.fleet_per_hour then trip(f, t, 'fleet_restart_rate', v) end
  end
  if C.fleet_per_hour > 0 and f.tripped then hold(f, key, r, v, nil, untilRearm(f, t)) end
end

-- main runs one step. A step of another epoch than {p}:epoch's fails with
-- state_lost, a judging one without its configuration with no_config; epoch
-- makes one if none, raises {p}:seq to floor, and moves when it is below seen.
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
    if not (kind == 's' or kind == 'n' and tonumber(v) or kind == 'd' and string.match(v, '^%d+$') or
      kind == 't' and (v == '' or #v == 16 and string.match(v, '^%d+$'))) then
      return redis.error_reply('crashloop: ' .. op .. ': argument ' .. name .. ': ' .. v .. ' is not a ' .. KINDS[kind])
    end
    A[name] = kind == 'n' and tonumber(v) or v
  end
  local judges, cur, cfg = op == 'judge' or op == 'proceed' or op == 'fleet'
  if judges then -- with the fleet string and the record, read ahead (fload, begin)
    local got = redis.call('MGET', tag .. 'epoch', keys[#keys], tag .. 'fleet', K1)
    cur, cfg, FLEET, RECORD = got[1], got[2], got[3], got[4]
  else
    cur = redis.call('GET', tag .. 'epoch')
  end
  if op == 'epoch' then
    if not cur then redis.call('SET', tag .. 'epoch', A.fresh) end
    cur = cur or A.fresh
    if cur ~= A.epoch then return {'epoch', cur} end
    local seq, floor = tonumber(redis.call('GET', tag .. 'seq') or '0'), tonumber(A.floor)
    if seq < floor then redis.call('SET', tag .. 'seq', A.floor) end
    if math.max(seq, floor) >= tonumber(A.seen) then return {'epoch', cur} end
    -- The move: a new epoch, so that every replica writes back its parks
    -- (naming version 0); each park standing takes a version above any seen.
    A.epoch = 'failover-' .. A.fresh
    redis.call('SET', tag .. 'epoch', A.epoch)
    redis.call('SET', tag .. 'seq', string.format('%d', math.max(tonumber(A.seen), floor)))
    redis.call('DEL', tag .. 'ver')
    parks(function(key, rk, r) rewrite(rk, key, r, r.p, 'failover') end)
    return {'epoch', A.epoch}
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

  if op == 'judge' then -- keys: record, fleet, parked, held, causes, configuration
    if not ENDINGS[A.ending] then
      return redis.error_reply('crashloop: judge: argument ending: unknown ending ' .. A.ending)
    end
    local f, t, key, v, _, r = begin(true, A.healthy == 1)
    if not r.p then
      judge(f, t, key, r, v)
      rsave(K1, r, C.record_ttl_ms)
    end
    fsave(f, C.fleet_ttl_ms)
    return verdict(key, r, v)
  elseif op == 'proceed' then -- keys: record, fleet, held, causes, configuration (rules.proceed)
    local f, t, key, v, rv, r = begin(false, false)
    fsave(f, C.fleet_ttl_ms)
    if r.p and r.probe and probeWait(r, t) <= 0 then -- the park's probe is due: claimed
      r.probes, r.probe, v.probe = r.probes + 1, t, 1
      rsave(K1, r, 'keep')
    end
    if not rv or r.p or r.held == 0 then return verdict(key, r, v) end
    -- ttl: a record held for a cause gets its expiry back when written
    local c, ttl = r.cause ~= '' and cfind(r.cause), r.cause ~= '' and C.record_ttl_ms or 'keep'
    if c and c.held and (t - c.slot) * 1000 < C.probe_every_ns then
      v.held, v.cause, v.wait_ns = 1, c.cause, untilProbe(c, t)
      return verdict(key, r, v)
    elseif c and c.held then -- the cause's probe: it goes
      c.slot, c.prober, c.probed, v.probe = t, key, t, 1
      csave()
    elseif C.fleet_per_hour > 0 and f.tripped then
      v.held, v.wait_ns = 1, untilRearm(f, t)
    else -- the release: the re-arm's time plus the restart's offset
      local left = r.rel and (tonumber(r.rel.at) - t) * 1000 + tonumber(r.rel.off) or 0
      if left > 0 then v.held, v.wait_ns = 1, left end
    end
    if not v.held then -- it goes
      r.held, r.rel = 0, false
      redis.call('ZREM', keys[3], key)
    end
    r.cause = '' -- its cause, if any, is no longer held
    if not v.held or ttl ~= 'keep' then rsave(K1, r, ttl) end
    return verdict(key, r, v)
  elseif op == 'fleet' or op == 'fleet_read' then
    -- keys: fleet, causes (and for 'fleet', which writes the latest time and
    -- its limit, the configuration). The breaker as a re-arm would leave it.
    local f = fload()
    full(f)
    local t = at(f)
    if op == 'fleet' then
      f.rph, f.cdns = C.rph, C.cdns
      fsave(f, C.fleet_ttl_ms)
    end
    local tripped, w, held = f.tripped, f.w, {}
    if tripped and (t - f.since) * 1000 >= tonumber(f.cdns) then tripped, w = false, '' end
    local total, failing = fleetKeys('', false)
    for _, c in ipairs(cload()) do if c.held then held[#held + 1] = c.cause end end
    return {'tripped', tripped and 1 or 0, 'since', f.since, 'failing', failing, 'total', total,
      'hour', #w / 4, 'per_hour', tonumber(f.rph), 'cooldown_ns', tonumber(f.cdns), 'now', now,
      'held_causes', held}
  elseif op == 'lookup' then -- keys: record
    return stands(keyOf(K1), rdec(redis.call('GET', K1)))
  elseif op == 'resume' or op == 'forget' then
    -- keys: record, parked, held. Applied only at the version named (the
    -- park's for a resume, the key's for a forget), else the key as it stands.
    local key, r, named = keyOf(K1), rdec(redis.call('GET', K1)), tonumber(A.version)
    if op == 'resume' and (not r.p or tonumber(r.p.version) ~= named) or op == 'forget' and version(key) ~= named then
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
  elseif op == 'restore' then
    -- keys: parked, then the record of each park. A park is written (with the
    -- next version) only over a key not parked still at the version named.
    if #argv - 4 ~= #keys - 1 then
      return redis.error_reply('crashloop: restore: ' .. (#argv - 4) .. ' parks for ' .. (#keys - 1) .. ' keys')
    end
    local out = {}
    for i = 2, #keys do
      local key = keyOf(keys[i])
      local r, p = rdec(redis.call('GET', keys[i])), pdec(argv[i + 3])
      local written = not r.p and version(key) == tonumber(p.version)
      if written then
        redis.call('SADD', K1, key)
        rewrite(keys[i], key, r, p, A.origin)
      end
      out[#out + 1] = stands(key, r, 'written', written and 1 or 0)
    end
    return out
  elseif op == 'claim' then
    -- keys: the claim. The first to claim a transition wins it, and wins again
    -- (a claim whose reply was lost is sent again); every other loses.
    if A.replica == '' then return redis.error_reply('crashloop: claim: an empty replica') end
    if tonumber(A.version) > tonumber(redis.call('GET', tag .. 'seq') or '0') then
      return {'won', 0} -- a version the server never gave (lost with its claim): nobody wins
    end
    local holder = redis.call('GET', K1)
    if not holder then redis.call('SET', K1, A.replica, 'EX', CLAIM_TTL) end
    return {'won', (holder or A.replica) == A.replica and 1 or 0}
  elseif op == 'parked' then -- keys: parked
    local out = {}
    parks(function(key, _, r) out[#out + 1] = parkObject(key, r.p) end)
    return out
  end

  -- op == 'members'. keys: the replica's members, replicas. The keys added and
  -- removed change the set if it holds expect keys (with full: it is rewritten).
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
    if redis.call('PTTL', keys[2]) < tonumber(A.ttl_ms) then redis.call('PEXPIRE', keys[2], A.ttl_ms) end
  else
    redis.call('SREM', keys[2], A.replica)
  end
  return {'applied', 1, 'count', n}
end

-- Run as a script; loaded as a library, script.go registers main (FCALL).
if not redis.register_function then return main(KEYS, ARGV) end
