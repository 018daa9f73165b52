-- complete.lua: mark KEYS[1] DONE if the caller's claim still owns it: the
-- same fence, and on a CLAIMED record the same token (a DONE record keeps
-- none; its fence alone names the claim that completed it).
--   ARGV[1] fence  ARGV[2] ttl (ms)  ARGV[3] grace (ms)  ARGV[4] token
-- Reply: 1 done (now or already, with this fence), 0 fenced out or absent.
local rec = redis.call('GET', KEYS[1])
if not rec then
  return 0
end
local state, fence, lease_until, expires_at, fp, token = parse(rec)
if not state then
  return redis.error_reply(not_a_record)
end
local now = now_ms()
if fence ~= ARGV[1] or (state == 'C' and token ~= ARGV[4]) or now >= tonumber(expires_at) then
  return 0
end
if state == 'D' then
  return 1
end
-- DONE drops the token and keeps the fingerprint.
expires_at = now + tonumber(ARGV[2])
redis.call('SET', KEYS[1], record(string.format('D%s:%s:%d:', fence, lease_until, expires_at), fp, ''),
  'PXAT', string.format('%d', expires_at + tonumber(ARGV[3])))
return 1
