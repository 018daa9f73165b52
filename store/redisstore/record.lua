-- record.lua: the record layout and the server clock, prepended to every script (see scripts.go).
-- Without a fingerprint:  <C|D><fence>:<leaseUntil>:<expiresAt>:<token>
-- With one:               <c|d><fence>:<leaseUntil>:<expiresAt>:<n>:<fingerprint><token>
-- With an origin:          O<C|D><fence>:<leaseUntil>:<expiresAt>:<n>:<m>:<fingerprint><origin><token>
-- With failures:           A<C|D|F><fence>:<leaseUntil>:<expiresAt>:<n>:<m>:<attempts>:<firstFailure>:<k>:<fingerprint><origin><reason><token>
-- where n, m and k are the fingerprint's, the origin's and the reason's
-- lengths in bytes, in decimal. See doc.go.

-- parse_failed is parse for the A layout, a record that keeps failures
-- (store.Failer): the only layout with the F state, since a FAILED record
-- has at least one.
local function parse_failed(rec)
  local state, fence, lease_until, expires_at, rest = string.match(rec, '^A([CDF])(%d+):(%d+):(%d+):(.*)$')
  if not state then
    return nil
  end
  local n, m, attempts, first, k, tail = string.match(rest, '^(%d+):(%d+):(%d+):(%d+):(%d+):(.*)$')
  n, m, k = tonumber(n), tonumber(m), tonumber(k)
  if not n or not m or not k or n + m + k > #tail then
    return nil
  end
  return state, fence, lease_until, expires_at, string.sub(tail, 1, n), string.sub(tail, n + m + k + 1),
    string.sub(tail, n + 1, n + m), {attempts, first, string.sub(tail, n + m + 1, n + m + k)}
end

-- parse splits a record into state ('C', 'D' or 'F'), fence, leaseUntil
-- and expiresAt (as the digits stored), fingerprint ('' for none), token,
-- origin ('' for none) and failures (nil for none, else {attempts,
-- firstFailure, reason}, the first two as the digits stored), or returns
-- nil when rec is not a record. The failures come last, and only from an
-- A record, so that a record without any costs the scripts nothing more.
local function parse(rec)
  local state, fence, lease_until, expires_at, rest = string.match(rec, '^([CDcd])(%d+):(%d+):(%d+):(.*)$')
  if not state then
    state, fence, lease_until, expires_at, rest = string.match(rec, '^O([CD])(%d+):(%d+):(%d+):(.*)$')
    if not state then
      return parse_failed(rec)
    end
    local n, m, tail = string.match(rest, '^(%d+):(%d+):(.*)$')
    n, m = tonumber(n), tonumber(m)
    if not n or not m or n + m > #tail then
      return nil
    end
    return state, fence, lease_until, expires_at, string.sub(tail, 1, n), string.sub(tail, n + m + 1), string.sub(tail, n + 1, n + m)
  end
  if state == 'C' or state == 'D' then
    return state, fence, lease_until, expires_at, '', rest, ''
  end
  local n, tail = string.match(rest, '^(%d+):(.*)$')
  n = tonumber(n)
  if not n or n > #tail then
    return nil
  end
  return string.upper(state), fence, lease_until, expires_at, string.sub(tail, 1, n), string.sub(tail, n + 1), ''
end

-- record joins head ('<C|D|F><fence>:<leaseUntil>:<expiresAt>:'), fp,
-- token, origin and fails (as parse returns them) into a record, in the
-- shortest layout that keeps them; an F head needs fails. The
-- fingerprint, origin, reason and token are appended with .., not
-- format's %s, which stops at a NUL byte.
local function record(head, fp, token, origin, fails)
  if fails then
    return 'A' .. head .. #fp .. ':' .. #origin .. ':' .. fails[1] .. ':' .. fails[2] .. ':' .. #fails[3] .. ':' ..
      fp .. origin .. fails[3] .. token
  end
  if origin ~= '' then
    return 'O' .. head .. #fp .. ':' .. #origin .. ':' .. fp .. origin .. token
  end
  if fp == '' then
    return head .. token
  end
  return string.lower(string.sub(head, 1, 1)) .. string.sub(head, 2) .. #fp .. ':' .. fp .. token
end

-- fence_at is the fence a write raises old to at now (ms): store.FenceAt
-- on the server's clock, counted in microseconds and read to the
-- millisecond. A record made anew after Redis deleted its predecessor
-- starts above every fence the predecessor handed out. Fences stay below
-- 2^53 (about 1.8e15 today), so a Lua number holds them exactly.
local function fence_at(old, now)
  return math.max(old + 1, now * 1000)
end

-- released is the record a Release (or a Forget) leaves of a claim at
-- fence: CLAIMED with a higher fence, its lease ended at now, with no token
-- and no fingerprint, so that neither the old fence nor the old token may
-- act on it again, and the last holder's origin. It lives at least ttl
-- more, so that Redis deletes it no sooner than a ttl after the fence it
-- now holds. fails are the failures it keeps: a Release's (and a counted
-- Fail's) keep the record's, so that the next holder's failures add to
-- them; a Forget's and a Retry's are nil. Returns the record and its
-- expiresAt.
local function released(fence, now, expires_at, ttl, origin, fails, token)
  expires_at = math.max(tonumber(expires_at), now + ttl)
  return record(string.format('C%d:%d:%d:', fence_at(tonumber(fence), now), now, expires_at), '', token or '', origin, fails), expires_at
end

-- now_ms reads the server's clock in milliseconds: every decision is taken
-- on it, never on a client's.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local not_a_record = 'ERR idemgate: key holds a value that is not an idemgate record'

