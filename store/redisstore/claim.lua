-- claim.lua: take KEYS[1] for a lease, or report who has it.
--   ARGV[1] lease (ms)  ARGV[2] ttl (ms)  ARGV[3] grace (ms)  ARGV[4] claim token
-- Reply: {1, fence, leaseUntil}  won (new, reclaimed or re-affirmed)
--        {2, fence}              already done
--        {3, fence, leaseUntil}  held by another live claim
-- Record layout (see doc.go): <C|D><fence>:<leaseUntil>:<expiresAt>:<token>
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fence = 0
local rec = redis.call('GET', KEYS[1])
if rec then
  local state, f, lease_until, expires_at, token = string.match(rec, '^([CD])(%d+):(%d+):(%d+):(.*)$')
  if not state then
    return redis.error_reply('ERR idemgate: key holds a value that is not an idemgate record')
  end
  fence = tonumber(f)
  lease_until = tonumber(lease_until)
  -- A record past expiresAt counts as absent, except that its fence goes on.
  if now < tonumber(expires_at) then
    if state == 'D' then
      return {2, fence}
    end
    if token == ARGV[4] then
      return {1, fence, lease_until} -- our own earlier win, retried: re-affirm
    end
    if now < lease_until then
      return {3, fence, lease_until}
    end
  end
end
-- New, expired, lapsed or released: take it, one fence above the last.
fence = fence + 1
local lease_until = now + tonumber(ARGV[1])
local expires_at = lease_until + tonumber(ARGV[2])
-- The token is appended with .. rather than %s: format's %s stops at a NUL byte.
redis.call('SET', KEYS[1], string.format('C%d:%d:%d:', fence, lease_until, expires_at) .. ARGV[4],
  'PXAT', string.format('%d', expires_at + tonumber(ARGV[3])))
return {1, fence, lease_until}
