-- forget.lua: force the live record at KEYS[1] free, whatever its state.
-- Reply: 1 forgotten, 0 nothing to forget (absent or expired).
-- The record becomes a released claim: CLAIMED, one fence higher, its lease
-- ended now, no token and no fingerprint, exactly what release.lua writes
-- but without asking for the holder's fence. Its expiry and PXAT stay, so
-- the fence goes on past this record's life as it would after a Release.
-- The layout is record.lua's.
local rec = redis.call('GET', KEYS[1])
if not rec then
  return 0
end
local state, fence, _, expires_at = parse(rec)
if not state then
  return redis.error_reply(not_a_record)
end
local now = now_ms()
if now >= tonumber(expires_at) then
  return 0
end
redis.call('SET', KEYS[1], released(fence, now, expires_at), 'KEEPTTL')
return 1
