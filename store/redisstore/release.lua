-- release.lua: give KEYS[1] up if the caller's fence and token still own
-- the claim.
--   ARGV[1] fence  ARGV[2] token  ARGV[3] ttl (ms)  ARGV[4] grace (ms)
-- Reply: 1 released, 0 ignored (absent, DONE, FAILED, fenced out or
-- expired).
local rec = redis.call('GET', KEYS[1])
if not rec then
  return 0
end
local state, fence, _, expires_at, _, token, origin, fails = parse(rec)
if not state then
  return redis.error_reply(not_a_record)
end
local now = now_ms()
if state ~= 'C' or fence ~= ARGV[1] or token ~= ARGV[2] or now >= tonumber(expires_at) then
  return 0
end
-- Raise the fence, end the lease now and forget the token and the
-- fingerprint: the claim is abandoned, so neither its fence nor its token
-- may act on the record again. The origin stays (the last holder's), and
-- so do the failures, for the next holder's to add to.
local rel, at = released(fence, now, expires_at, tonumber(ARGV[3]), origin, fails)
redis.call('SET', KEYS[1], rel, 'PXAT', string.format('%d', at + tonumber(ARGV[4])))
return 1
