-- inspect.lua: read the record at KEYS[1] and the server's clock; write nothing.
-- Reply: {now}                                                                 no live record
--        {now, state, fence, leaseUntil, expiresAt, token, fingerprint, origin} a live record
-- now, fence, leaseUntil and expiresAt are strings of decimal digits, so
-- that a fence beyond 2^53 reaches the client exactly; state is C or D;
-- fingerprint and origin are '' for none. The layout is record.lua's.
local now = now_ms()
local clock = string.format('%d', now)
local rec = redis.call('GET', KEYS[1])
if not rec then
  return {clock}
end
local state, fence, lease_until, expires_at, fp, token, origin = parse(rec)
if not state then
  return redis.error_reply(not_a_record)
end
if now >= tonumber(expires_at) then
  return {clock} -- expired: absent to every operation, though Redis keeps it for the grace
end
return {clock, state, fence, lease_until, expires_at, token, fp, origin}
