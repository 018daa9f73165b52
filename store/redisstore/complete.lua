-- complete.lua: mark KEYS[1] DONE if the caller's claim still owns it: the
-- same fence, and on a CLAIMED record the same token (a DONE record keeps
-- none; its fence alone names the claim that completed it). A FAILED
-- record is owned by nobody, not even the claim that failed it.
--   ARGV[1] fence  ARGV[2] ttl (ms)  ARGV[3] grace (ms)  ARGV[4] token
-- Reply: 1 done (now or already, with this fence), 0 fenced out, failed
-- or absent.
local rec = redis.call('GET', KEYS[1])
if not rec then
  return 0
end
local state, fence, _, expires_at, fp, token, origin, fails = parse(rec)
if not state then
  return redis.error_reply(not_a_record)
end
local now = now_ms()
if fence ~= ARGV[1] or (state == 'C' and token ~= ARGV[4]) or state == 'F' or now >= tonumber(expires_at) then
  return 0
end
if state == 'D' then
  return 1
end
-- DONE drops the token, keeps the fingerprint, the origin and the
-- failures, and ends the lease now: a DONE record's leaseUntil is its
-- completion instant.
expires_at = now + tonumber(ARGV[2])
redis.call('SET', KEYS[1], record(string.format('D%s:%d:%d:', fence, now, expires_at), fp, '', origin, fails),
  'PXAT', string.format('%d', expires_at + tonumber(ARGV[3])))
return 1
