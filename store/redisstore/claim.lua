-- claim.lua: take KEYS[1] for a lease, or report who has it.
--   ARGV[1] lease (ms)  ARGV[2] ttl (ms)  ARGV[3] grace (ms)  ARGV[4] claim token
--   ARGV[5] payload fingerprint ('' for none)  ARGV[6] origin ('' for none)
-- Reply: {1, fence, leaseUntil, fingerprint, origin}  won (new, reclaimed or re-affirmed)
--        {2, fence, fingerprint, origin}              already done
--        {3, fence, leaseUntil, fingerprint, origin}  held by another live claim
--        {4, fence, attempts, reason, fingerprint, origin} already failed
-- where fingerprint and origin are the ones the record keeps, '' for none.
-- A duplicate (a DONE, unexpired record) is answered from the GET alone:
-- the script returns before any write, so it moves no dirty counter, sends
-- nothing to replicas or the AOF and leaves the record's expiry as it was
-- (TestDuplicateClaimWritesNothing). The script cannot declare no-writes
-- (nor run as EVALSHA_RO) to say so to the server: the same script writes
-- when it wins, and Redis refuses any write from a no-writes script.
-- A FAILED record is answered from the GET alone too. Only a record that
-- keeps failures (an A record) is looked at for them, so a Claim of any
-- other costs what it did before FAILED existed.
local now = now_ms()
local fence = 0
local kept -- the failures the winner keeps: a live record's, nil for a new or expired one
local rec = redis.call('GET', KEYS[1])
if rec then
  local state, f, lease_until, expires_at, fp, token, origin, fails = parse(rec)
  if not state then
    return redis.error_reply(not_a_record)
  end
  fence = tonumber(f)
  lease_until = tonumber(lease_until)
  -- A record past expiresAt counts as absent, except that its fence goes on.
  if now < tonumber(expires_at) then
    if state == 'D' then
      return {2, fence, fp, origin}
    end
    if fails then
      if state == 'F' then
        return {4, fence, tonumber(fails[1]), fails[3], fp, origin}
      end
      kept = fails -- a released or lapsed claim: the failures of its holders add up
    end
    if token == ARGV[4] then
      return {1, fence, lease_until, fp, origin} -- our own earlier win, retried: re-affirm
    end
    if now < lease_until then
      return {3, fence, lease_until, fp, origin}
    end
  end
end
-- New, expired, lapsed or released: take it, the fence raised above the
-- last and to the clock (fence_at), with the caller's fingerprint and
-- origin (or none), and the failures kept.
fence = fence_at(fence, now)
local lease_until = now + tonumber(ARGV[1])
local expires_at = lease_until + tonumber(ARGV[2])
redis.call('SET', KEYS[1], record(string.format('C%d:%d:%d:', fence, lease_until, expires_at), ARGV[5], ARGV[4], ARGV[6], kept),
  'PXAT', string.format('%d', expires_at + tonumber(ARGV[3])))
return {1, fence, lease_until, ARGV[5], ARGV[6]}
