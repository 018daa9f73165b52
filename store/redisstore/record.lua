-- record.lua: the record layout, prepended to every script (see scripts.go).
-- Without a fingerprint:  <C|D><fence>:<leaseUntil>:<expiresAt>:<token>
-- With one:               <c|d><fence>:<leaseUntil>:<expiresAt>:<n>:<fingerprint><token>
-- where n is the fingerprint's length in bytes, in decimal. See doc.go.

-- parse splits a record into state ('C' or 'D'), fence, leaseUntil and
-- expiresAt (as the digits stored), fingerprint ('' for none) and token,
-- or returns nil when rec is not a record.
local function parse(rec)
  local state, fence, lease_until, expires_at, rest = string.match(rec, '^([CDcd])(%d+):(%d+):(%d+):(.*)$')
  if not state then
    return nil
  end
  if state == 'C' or state == 'D' then
    return state, fence, lease_until, expires_at, '', rest
  end
  local n, tail = string.match(rest, '^(%d+):(.*)$')
  n = tonumber(n)
  if not n or n > #tail then
    return nil
  end
  return string.upper(state), fence, lease_until, expires_at, string.sub(tail, 1, n), string.sub(tail, n + 1)
end

-- record joins head ('<C|D><fence>:<leaseUntil>:<expiresAt>:'), fp and
-- token into a record. The fingerprint and token are appended with ..,
-- not format's %s, which stops at a NUL byte.
local function record(head, fp, token)
  if fp == '' then
    return head .. token
  end
  return string.lower(string.sub(head, 1, 1)) .. string.sub(head, 2) .. #fp .. ':' .. fp .. token
end

local not_a_record = 'ERR idemgate: key holds a value that is not an idemgate record'

