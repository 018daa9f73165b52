-- inspect.lua: read the record at KEYS[1] and the server's clock; write nothing.
-- Reply: {now}                                                              no live record
--        {now, state, fence, leaseUntil, expiresAt, token, fingerprint, origin,
--         attempts, firstFailure, reason}                                   a live record
-- now, fence, leaseUntil, expiresAt, attempts and firstFailure are strings
-- of decimal digits, so that a fence beyond 2^53 reaches the client
-- exactly; state is C, D or F; fingerprint, origin and reason are '' for
-- none, attempts and firstFailure '0'. The layout is record.lua's.
local now = now_ms()
local clock = string.format('%d', now)
local rec = redis.call('GET', KEYS[1])
if not rec then
  return {clock}
end
local state, fence, lease_until, expires_at, fp, token, origin, fails = parse(rec)
if not state then
  return redis.error_reply(not_a_record)
end
if now >= tonumber(expires_at) then
  return {clock} -- expired: absent to every operation, though Redis keeps it for the grace
end
fails = fails or {'0', '0', ''}
return {clock, state, fence, lease_until, expires_at, token, fp, origin, fails[1], fails[2], fails[3]}
