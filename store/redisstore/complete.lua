-- complete.lua: mark KEYS[1] DONE if the caller's fence still owns it.
--   ARGV[1] fence  ARGV[2] ttl (ms)  ARGV[3] grace (ms)
-- Reply: 1 done (now or already, with this fence), 0 fenced out or absent.
-- Record layout (see doc.go): <C|D><fence>:<leaseUntil>:<expiresAt>:<token>
local rec = redis.call('GET', KEYS[1])
if not rec then
  return 0
end
local state, fence, lease_until, expires_at = string.match(rec, '^([CD])(%d+):(%d+):(%d+):')
if not state then
  return redis.error_reply('ERR idemgate: key holds a value that is not an idemgate record')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if fence ~= ARGV[1] or now >= tonumber(expires_at) then
  return 0
end
if state == 'D' then
  return 1
end
expires_at = now + tonumber(ARGV[2])
redis.call('SET', KEYS[1], string.format('D%s:%s:%d:', fence, lease_until, expires_at),
  'PXAT', string.format('%d', expires_at + tonumber(ARGV[3])))
return 1
