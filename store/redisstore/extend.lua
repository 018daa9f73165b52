-- extend.lua: prolong the live claim on KEYS[1] if the caller's fence and
-- token own it.
--   ARGV[1] fence  ARGV[2] lease (ms)  ARGV[3] ttl (ms)  ARGV[4] grace (ms)
--   ARGV[5] token
-- Reply: the new leaseUntil, or 0 when fenced out (absent, DONE, FAILED,
-- another fence or token, or expired).
local rec = redis.call('GET', KEYS[1])
if not rec then
  return 0
end
local state, fence, _, expires_at, fp, token, origin, fails = parse(rec)
if not state then
  return redis.error_reply(not_a_record)
end
local now = now_ms()
expires_at = tonumber(expires_at)
if state ~= 'C' or fence ~= ARGV[1] or token ~= ARGV[5] or now >= expires_at then
  return 0
end
local lease_until = now + tonumber(ARGV[2])
expires_at = math.max(expires_at, lease_until + tonumber(ARGV[3]))
redis.call('SET', KEYS[1], record(string.format('C%s:%d:%d:', fence, lease_until, expires_at), fp, token, origin, fails),
  'PXAT', string.format('%d', expires_at + tonumber(ARGV[4])))
return lease_until
