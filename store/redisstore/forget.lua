-- forget.lua: force the live record at KEYS[1] free (Forget), or only a
-- FAILED one (Retry).
--   ARGV[1] ttl (ms)  ARGV[2] grace (ms)  ARGV[3] 'F' to free a FAILED record only, '' for any
-- Reply: 1 freed, 0 nothing to free (absent, expired, or not FAILED when
-- ARGV[3] asks for it).
-- The record becomes a released claim: CLAIMED, a fence higher, its lease
-- ended now, no token, no fingerprint and no failures (but its origin),
-- what release.lua writes but without asking for the holder's fence and
-- token, and with a fresh count for the next holder. The layout is
-- record.lua's.
local rec = redis.call('GET', KEYS[1])
if not rec then
  return 0
end
local state, fence, _, expires_at, _, _, origin = parse(rec)
if not state then
  return redis.error_reply(not_a_record)
end
local now = now_ms()
if now >= tonumber(expires_at) or (ARGV[3] ~= '' and state ~= ARGV[3]) then
  return 0
end
local rel, at = released(fence, now, expires_at, tonumber(ARGV[1]), origin)
redis.call('SET', KEYS[1], rel, 'PXAT', string.format('%d', at + tonumber(ARGV[2])))
return 1
