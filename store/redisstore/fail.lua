-- fail.lua: count a failed attempt of the caller's claim on KEYS[1], and
-- make the record FAILED when the failure is final or spends the budget.
--   ARGV[1] fence  ARGV[2] token  ARGV[3] ttl (ms)  ARGV[4] grace (ms)
--   ARGV[5] reason  ARGV[6] '1' when final, '0' otherwise
--   ARGV[7] the budget, store.Failure.MaxAttempts (0 or less for none)
-- Reply: {attempts, 1}  FAILED (now, or already under this fence)
--        {attempts, 0}  counted, and the claim released
--        {0, 0}         not the caller's claim (absent, expired, DONE,
--                       another fence or token, or released)
-- The decision is store.Failure.FailedAttempts's, which the Go side
-- cannot run here without a second round trip.
local rec = redis.call('GET', KEYS[1])
if not rec then
  return {0, 0}
end
local state, fence, _, expires_at, fp, token, origin, fails = parse(rec)
if not state then
  return redis.error_reply(not_a_record)
end
local now = now_ms()
if fence ~= ARGV[1] or now >= tonumber(expires_at) then
  return {0, 0}
end
if state == 'F' then
  return {tonumber(fails[1]), 1} -- a retry of the Fail that made it FAILED: answer as it did
end
if state ~= 'C' or token ~= ARGV[2] then
  return {0, 0}
end
-- One more failure, the last one's reason, and the first one's instant.
local attempts, first = 1, string.format('%d', now)
if fails then
  attempts, first = tonumber(fails[1]) + 1, fails[2]
end
fails = {string.format('%d', attempts), first, ARGV[5]}
local budget = tonumber(ARGV[7])
if ARGV[6] == '1' or (budget > 0 and attempts >= budget) then
  -- FAILED keeps the claim's fence, fingerprint and origin, drops the
  -- token as DONE does (the fence alone names the claim that failed it),
  -- and, like Complete, ends the lease now and expires a ttl later.
  expires_at = now + tonumber(ARGV[3])
  redis.call('SET', KEYS[1], record(string.format('F%s:%d:%d:', fence, now, expires_at), fp, '', origin, fails),
    'PXAT', string.format('%d', expires_at + tonumber(ARGV[4])))
  return {attempts, 1}
end
-- A counted failure is a Release that keeps the count.
local rel, at = released(fence, now, expires_at, tonumber(ARGV[3]), origin, fails)
redis.call('SET', KEYS[1], rel, 'PXAT', string.format('%d', at + tonumber(ARGV[4])))
return {attempts, 0}
