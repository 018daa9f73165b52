-- forget.lua: force the live record at KEYS[1] free (Forget), or only a
-- FAILED one (Retry).
--   ARGV[1] ttl (ms)  ARGV[2] grace (ms)  ARGV[3] 'F' to free a FAILED record only, '' for any
--   ARGV[4] this call's token
-- Reply: 1 freed (by this call, or by its earlier run whose reply was
-- lost), 0 nothing to free (absent, expired, or not FAILED when ARGV[3]
-- asks for it).
-- The record becomes a released claim: CLAIMED, a fence higher, its lease
-- ended now, no fingerprint and no failures (but its origin), what
-- release.lua writes but without asking for the holder's fence and token,
-- and with a fresh count for the next holder. Its token is the call's, so
-- that a client retrying the call after a lost reply is told it freed the
-- record; no Claim has it, and any Claim takes the released record over.
-- The layout is record.lua's.
local rec = redis.call('GET', KEYS[1])
if not rec then
  return 0
end
local state, fence, _, expires_at, _, token, origin = parse(rec)
if not state then
  return redis.error_reply(not_a_record)
end
local now = now_ms()
if now >= tonumber(expires_at) then
  return 0
end
if state == 'C' and token == ARGV[4] then
  return 1 -- this call's own earlier run, retried
end
if ARGV[3] ~= '' and state ~= ARGV[3] then
  return 0
end
local rel, at = released(fence, now, expires_at, tonumber(ARGV[1]), origin, nil, ARGV[4])
redis.call('SET', KEYS[1], rel, 'PXAT', string.format('%d', at + tonumber(ARGV[2])))
return 1
