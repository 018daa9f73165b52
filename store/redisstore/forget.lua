-- forget.lua: force the live record at KEYS[1] free, whatever its state.
--   ARGV[1] ttl (ms)  ARGV[2] grace (ms)
-- Reply: 1 forgotten, 0 nothing to forget (absent or expired).
-- The record becomes a released claim: CLAIMED, a fence higher, its lease
-- ended now, no token and no fingerprint (but its origin), exactly what release.lua writes
-- but without asking for the holder's fence and token. The layout is
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
if now >= tonumber(expires_at) then
  return 0
end
local rel, at = released(fence, now, expires_at, tonumber(ARGV[1]), origin)
redis.call('SET', KEYS[1], rel, 'PXAT', string.format('%d', at + tonumber(ARGV[2])))
return 1
