package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/store"
)

// bugs switches on one deliberate violation of the contract each.
type bugs struct {
	noFenceBumpOnRelease bool
	leaseCheckedComplete bool
	nonAtomicClaim       bool
	noReaffirm           bool
	releaseDeletes       bool
	completeIgnoresFence bool
	doneNeverExpires     bool
	extendIgnoresFence   bool
	ignoresContext       bool
	truncatesKeys        bool
	acceptsBadKeys       bool
	noExtend             bool
	keepsTokenOnRelease  bool
	perFieldClaim        bool
	keepsFingerprint     bool // a takeover or a Release keeps the old fingerprint
	txIgnoresFence       bool // CompleteTx completes whatever the fence
	txOutsideTx          bool // CompleteTx writes at once, not on commit
	noInTx               bool // a CompleteTx method, but no Config.InTx
	forgetDeletes        bool // Forget removes the record: the fence restarts at 1
	forgetKeepsFence     bool // Forget frees the key without bumping the fence
	inspectShowsExpired  bool // Inspect reports a record past its expiry
	acceptsNotWon        bool // Complete, Release, Extend and CompleteTx take any claim
	txCompletesTwice     bool // CompleteTx answers nil on its own fence's DONE record
	txNoEnter            bool // CompleteTx does not call store.EnterTx
	fencesRestart        bool // a record made anew starts at fence 1, and raises add one
	ignoresTokens        bool // Complete, Release, Extend and CompleteTx compare the fence only
	acceptsLongLease     bool // Claim takes a lease that is not shorter than the ttl
	listContains         bool // List matches keys that contain the prefix anywhere
	listShowsExpired     bool // List returns records past their expiry
	listRepeats          bool // List's cursor restarts at the page's last record
	dropsOrigin          bool // the record keeps no origin
	callersOrigin        bool // AlreadyDone and HeldByOther name the caller's origin, not the winner's
	clearsOrigin         bool // Release and Forget clear the origin
	keepsOrigin          bool // a Claim without an origin keeps the released holder's
	acceptsBadOrigin     bool // Claim keeps an origin that store.CheckOrigin refuses
	failKeepsFence       bool // a counted failure frees the key without bumping the fence
	failIgnoresToken     bool // Fail compares the fence only
	failedCompletes      bool // Complete turns a FAILED record DONE
	claimResetsCount     bool // a Claim of a released record starts the count again
	retryAnyState        bool // Retry frees a record in any state
	retryKeepsCount      bool // Retry keeps the attempt count
	failedNeverExpires   bool // a FAILED record outlives its expiry
	namesKeyCut          bool // Claim's error names the key by its first 40 bytes, as %.40q does
}

// model is a small, obviously correct store (one mutex) with switchable bugs.
type model struct {
	mu    sync.Mutex // guards m
	m     map[string]rec
	now   func() time.Time
	ttl   time.Duration
	bugs  bugs
	reads atomic.Int64 // Claims' reads, for the non-atomic claim's window
}

// raise is the fence a write raises old to at now: store.FenceAt, or one
// more when fences restart.
func (s *model) raise(old int64, now time.Time) int64 {
	if s.bugs.fencesRestart {
		return old + 1
	}
	return store.FenceAt(old, now.UnixMicro())
}

// owner reports whether c's token owns r: a DONE record needs none (its
// fence alone names the claim that completed it).
func (s *model) owner(r rec, c store.Claim) bool {
	return r.done || r.token == c.Token || s.bugs.ignoresTokens
}

type rec struct {
	done, failed       bool
	attempts           int
	reason             string
	firstFailure       time.Time
	fence              int64
	token              string
	fp                 []byte
	origin             string
	leaseUntil, expiry time.Time
	completedAt        time.Time
}

func (s *model) key(k string) string {
	if s.bugs.truncatesKeys && len(k) > 255 {
		return k[:255]
	}
	return k
}

func (s *model) Claim(ctx context.Context, key string, lease time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	if err := ctx.Err(); err != nil && !s.bugs.ignoresContext {
		if s.bugs.namesKeyCut {
			return store.Claim{}, fmt.Errorf("model: claim %.40q: %w", key, err)
		}
		return store.Claim{}, err
	}
	if err := store.CheckKey(key); err != nil && !s.bugs.acceptsBadKeys {
		return store.Claim{}, err
	}
	if err := store.CheckLease(lease, s.ttl); err != nil && !s.bugs.acceptsLongLease {
		return store.Claim{}, err
	}
	token := opts.ClaimToken()
	fp := opts.Fingerprint
	if len(fp) == 0 {
		fp = nil
	}
	if err := store.CheckFingerprint(fp); err != nil {
		return store.Claim{}, err
	}
	origin := opts.Origin
	if err := store.CheckOrigin(origin); err != nil && !s.bugs.acceptsBadOrigin {
		return store.Claim{}, err
	}
	if !s.bugs.nonAtomicClaim {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	var readAt int64
	read := func() (rec, bool) {
		if s.bugs.nonAtomicClaim {
			s.mu.Lock()
			defer s.mu.Unlock()
			readAt = s.reads.Add(1)
		}
		r, ok := s.m[s.key(key)]
		return r, ok
	}
	write := func(r rec) {
		if s.bugs.nonAtomicClaim {
			// The window between read and write: it stays open until
			// another Claim has read too (or 10ms have passed), so that
			// racing Claims meet in it however the machine schedules them.
			for end := time.Now().Add(10 * time.Millisecond); s.reads.Load() == readAt && time.Now().Before(end); {
				time.Sleep(50 * time.Microsecond)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
		}
		s.m[s.key(key)] = r
	}
	if s.bugs.perFieldClaim {
		return s.claimPerField(key, token, lease), nil
	}
	now := s.now()
	r, ok := read()
	expired := ok && !now.Before(r.expiry) && !(r.done && s.bugs.doneNeverExpires) && !(r.failed && s.bugs.failedNeverExpires)
	seen := r.origin
	if s.bugs.callersOrigin {
		seen = origin
	}
	switch {
	case !ok || expired:
	case r.failed:
		return store.Claim{Key: key, Status: store.AlreadyFailed, Fence: r.fence, Fingerprint: r.fp, Origin: seen, Attempts: r.attempts, Reason: r.reason}, nil
	case !r.done && r.token == token && !s.bugs.noReaffirm:
		return store.Claim{Key: key, Status: store.Won, Fence: r.fence, Token: token, LeaseUntil: r.leaseUntil, Fingerprint: r.fp, Origin: r.origin}, nil
	case !r.done && now.Before(r.leaseUntil):
		return store.Claim{Key: key, Status: store.HeldByOther, Fence: r.fence, LeaseUntil: r.leaseUntil, Fingerprint: r.fp, Origin: seen}, nil
	case r.done:
		return store.Claim{Key: key, Status: store.AlreadyDone, Fence: r.fence, Fingerprint: r.fp, Origin: seen}, nil
	}
	if !ok || !s.bugs.keepsFingerprint || r.fp == nil {
		r.fp = fp
	}
	if !ok || !s.bugs.keepsOrigin || origin != "" {
		r.origin = origin
	}
	if s.bugs.dropsOrigin {
		r.origin = ""
	}
	next := rec{fence: s.raise(r.fence, now), token: token, fp: r.fp, origin: r.origin, leaseUntil: now.Add(lease)}
	if ok && !expired && !s.bugs.claimResetsCount {
		next.attempts, next.reason, next.firstFailure = r.attempts, r.reason, r.firstFailure
	}
	r = next
	r.expiry = r.leaseUntil.Add(s.ttl)
	write(r)
	return store.Claim{Key: key, Status: store.Won, Fence: r.fence, Token: token, LeaseUntil: r.leaseUntil, Fingerprint: r.fp, Origin: origin}, nil
}

// claimPerField is a Claim that tests for a takeover once per field, each
// time on a fresh reading of the clock, as an upsert that repeats the test
// in every column would. Called with s.mu held.
func (s *model) claimPerField(key, token string, lease time.Duration) store.Claim {
	fresh := s.now().Add(lease) // the new claim's lease, read first
	r, ok := s.m[key]
	if !ok {
		r = rec{fence: 1, token: token, leaseUntil: fresh, expiry: fresh.Add(s.ttl)}
		s.m[key] = r
		return store.Claim{Key: key, Status: store.Won, Fence: 1, Token: token, LeaseUntil: fresh}
	}
	wins := func() bool {
		now := s.now()
		return !now.Before(r.expiry) || (!r.done && !now.Before(r.leaseUntil) && r.token != token)
	}
	next := r
	if wins() {
		next.done = false
	}
	if wins() {
		next.fence = r.fence + 1
	}
	if wins() {
		next.token = token
	}
	if wins() {
		next.leaseUntil = fresh
	}
	if wins() {
		next.expiry = fresh.Add(s.ttl)
	}
	s.m[key] = next
	switch {
	case next.done:
		return store.Claim{Key: key, Status: store.AlreadyDone, Fence: next.fence}
	case next.token == token:
		return store.Claim{Key: key, Status: store.Won, Fence: next.fence, Token: token, LeaseUntil: next.leaseUntil}
	}
	return store.Claim{Key: key, Status: store.HeldByOther, Fence: next.fence, LeaseUntil: next.leaseUntil}
}

// won refuses a claim that is not won, unless the store is built to
// accept one.
func (s *model) won(c store.Claim) error {
	if s.bugs.acceptsNotWon {
		return nil
	}
	return store.CheckWon(c)
}

func (s *model) Complete(ctx context.Context, c store.Claim) (bool, error) {
	if err := s.won(c); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil && !s.bugs.ignoresContext {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	r, ok := s.m[s.key(c.Key)]
	if !ok || (r.fence != c.Fence || !s.owner(r, c)) && !s.bugs.completeIgnoresFence || !now.Before(r.expiry) || r.failed && !s.bugs.failedCompletes {
		return false, nil
	}
	if s.bugs.leaseCheckedComplete && !r.done && !now.Before(r.leaseUntil) {
		return false, nil
	}
	if !r.done {
		r.done, r.failed, r.expiry, r.completedAt = true, false, now.Add(s.ttl), now
		s.m[s.key(c.Key)] = r
	}
	return true, nil
}

func (s *model) Fail(ctx context.Context, c store.Claim, f store.Failure) (int, bool, error) {
	if err := s.won(c); err != nil {
		return 0, false, err
	}
	if err := store.CheckReason(f.Reason); err != nil {
		return 0, false, err
	}
	if err := ctx.Err(); err != nil && !s.bugs.ignoresContext {
		return 0, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	r, ok := s.m[s.key(c.Key)]
	switch {
	case !ok || !now.Before(r.expiry) || r.fence != c.Fence:
		return 0, false, nil
	case r.failed:
		return r.attempts, true, nil
	case r.done || r.token != c.Token && !s.bugs.failIgnoresToken:
		return 0, false, nil
	}
	n, failed := f.FailedAttempts(r.attempts)
	r.attempts, r.reason = n, f.Reason
	if r.firstFailure.IsZero() {
		r.firstFailure = now
	}
	if failed {
		r.failed, r.leaseUntil, r.expiry = true, now, now.Add(s.ttl)
	} else {
		if !s.bugs.failKeepsFence {
			r.fence = s.raise(r.fence, now)
		}
		r.token, r.fp, r.leaseUntil = "", nil, now
		if e := now.Add(s.ttl); e.After(r.expiry) {
			r.expiry = e
		}
	}
	s.m[s.key(c.Key)] = r
	return n, failed, nil
}

func (s *model) Retry(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil && !s.bugs.ignoresContext {
		return false, err
	}
	if err := store.CheckKey(key); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.m[s.key(key)]; !ok || !r.failed && !s.bugs.retryAnyState {
		return false, nil
	}
	attempts := s.m[s.key(key)].attempts
	ok := s.forget(key)
	if ok && s.bugs.retryKeepsCount {
		r := s.m[s.key(key)]
		r.attempts, r.reason, r.firstFailure = attempts, "kept", time.Unix(1, 0)
		s.m[s.key(key)] = r
	}
	return ok, nil
}

func (s *model) Release(ctx context.Context, c store.Claim) error {
	if err := s.won(c); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil && !s.bugs.ignoresContext {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[s.key(c.Key)]
	if !ok || r.done || r.failed || r.fence != c.Fence || !s.owner(r, c) {
		return nil
	}
	if s.bugs.releaseDeletes {
		delete(s.m, s.key(c.Key))
		return nil
	}
	now := s.now()
	if !s.bugs.noFenceBumpOnRelease {
		r.fence = s.raise(r.fence, now)
	}
	if !s.bugs.keepsTokenOnRelease {
		r.token = ""
	}
	if !s.bugs.keepsFingerprint {
		r.fp = nil
	}
	if s.bugs.clearsOrigin {
		r.origin = ""
	}
	r.leaseUntil = now
	s.m[s.key(c.Key)] = r
	return nil
}

func (s *model) Extend(ctx context.Context, c store.Claim, lease time.Duration) (store.Claim, error) {
	if err := s.won(c); err != nil {
		return store.Claim{}, err
	}
	if err := ctx.Err(); err != nil && !s.bugs.ignoresContext {
		return store.Claim{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	r, ok := s.m[s.key(c.Key)]
	if !ok || r.done || r.failed || (r.fence != c.Fence || !s.owner(r, c)) && !s.bugs.extendIgnoresFence || !now.Before(r.expiry) {
		return store.Claim{}, store.ErrFenced
	}
	r.leaseUntil = now.Add(lease)
	if e := r.leaseUntil.Add(s.ttl); e.After(r.expiry) {
		r.expiry = e
	}
	s.m[s.key(c.Key)] = r
	return store.Claim{Key: c.Key, Status: store.Won, Fence: r.fence, Token: r.token, LeaseUntil: r.leaseUntil}, nil
}

// modelTx is a transaction of the model: its writes wait in it, and are
// applied, under the model's lock, when it commits.
type modelTx struct{ pending []func() }

// CompleteTx records c done in tx. The fence is checked now, as a SQL
// UPDATE checks it when it runs, and again when tx commits, where a
// database would have held the row's lock in between. A record already
// DONE under c's fence fails the transaction: its work committed before.
func (s *model) CompleteTx(ctx context.Context, tx *modelTx, c store.Claim) error {
	if err := s.won(c); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil && !s.bugs.ignoresContext {
		return err
	}
	if !s.bugs.txNoEnter {
		store.EnterTx(c)
	}
	k := s.key(c.Key)
	owns := func() bool { // called with s.mu held
		r, ok := s.m[k]
		return ok && (r.fence == c.Fence && s.owner(r, c) || s.bugs.txIgnoresFence) && s.now().Before(r.expiry)
	}
	apply := func() {
		r := s.m[k]
		if owns() && !r.done {
			now := s.now()
			r.done, r.expiry, r.completedAt = true, now.Add(s.ttl), now
			s.m[k] = r
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !owns() {
		return store.ErrFenced
	}
	if s.m[k].done && !s.bugs.txCompletesTwice {
		return fmt.Errorf("the record is DONE already: %w", store.ErrFenced)
	}
	if s.bugs.txOutsideTx {
		apply()
		return nil
	}
	tx.pending = append(tx.pending, apply)
	return nil
}

// inTx is Config.InTx for the model: fn's completions apply when it
// returns nil, and vanish otherwise.
func inTx(ctx context.Context, st store.Store, fn func(complete func(store.Claim) error) error) error {
	s, ok := st.(*model)
	if n, hidden := st.(noExtend); hidden {
		s, ok = n.s, true
	}
	if !ok {
		return fmt.Errorf("inTx: %T is not the model", st)
	}
	tx := &modelTx{}
	if err := fn(func(c store.Claim) error { return s.CompleteTx(ctx, tx, c) }); err != nil {
		return err // rolled back: the pending writes are dropped
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, apply := range tx.pending {
		apply()
	}
	return nil
}

func (s *model) Inspect(ctx context.Context, key string) (store.Record, bool, error) {
	if err := ctx.Err(); err != nil && !s.bugs.ignoresContext {
		return store.Record{}, false, err
	}
	if err := store.CheckKey(key); err != nil && !s.bugs.acceptsBadKeys {
		return store.Record{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	r, ok := s.m[s.key(key)]
	if !ok || (!now.Before(r.expiry) && !s.bugs.inspectShowsExpired) {
		return store.Record{}, false, nil
	}
	return s.view(key, r, now), true, nil
}

// view is r as Inspect and List show it.
func (s *model) view(key string, r rec, now time.Time) store.Record {
	out := store.Record{Key: key, State: store.Claimed, Fence: r.fence, Token: r.token, LeaseUntil: r.leaseUntil, ExpiresAt: r.expiry, ReadAt: now, Fingerprint: r.fp, Origin: r.origin,
		Attempts: r.attempts, Reason: r.reason, FirstFailure: r.firstFailure}
	switch {
	case r.done:
		out.State, out.Token, out.CompletedAt = store.Done, "", r.completedAt
	case r.failed:
		out.State, out.Token = store.Failed, ""
	}
	return out
}

func (s *model) Forget(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil && !s.bugs.ignoresContext {
		return false, err
	}
	if err := store.CheckKey(key); err != nil && !s.bugs.acceptsBadKeys {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forget(key), nil
}

// forget frees key's live record for an operator. Called with s.mu held.
func (s *model) forget(key string) bool {
	now := s.now()
	r, ok := s.m[s.key(key)]
	if !ok || !now.Before(r.expiry) && !(r.failed && s.bugs.failedNeverExpires) {
		return false
	}
	if s.bugs.forgetDeletes {
		delete(s.m, s.key(key))
		return true
	}
	if !s.bugs.forgetKeepsFence {
		r.fence = s.raise(r.fence, now)
	}
	r.done, r.failed, r.token, r.fp, r.leaseUntil = false, false, "", nil, now
	r.attempts, r.reason, r.firstFailure = 0, "", time.Time{}
	if e := now.Add(s.ttl); e.After(r.expiry) {
		r.expiry = e
	}
	if s.bugs.clearsOrigin {
		r.origin = ""
	}
	s.m[s.key(key)] = r
	return true
}

// noExtend hides Extend.
type noExtend struct{ s *model }

func (n noExtend) Claim(ctx context.Context, k string, l time.Duration, opts store.ClaimOptions) (store.Claim, error) {
	return n.s.Claim(ctx, k, l, opts)
}
func (n noExtend) Complete(ctx context.Context, c store.Claim) (bool, error) {
	return n.s.Complete(ctx, c)
}
func (n noExtend) Release(ctx context.Context, c store.Claim) error { return n.s.Release(ctx, c) }

func modelConfig(b bugs) Config {
	cfg := Config{NewStore: func(t testing.TB, s Setup) store.Store {
		m := &model{m: map[string]rec{}, now: s.Now, ttl: s.TTL, bugs: b}
		if b.noExtend {
			return noExtend{m}
		}
		return m
	}, Delete: func(t testing.TB, st store.Store, key string) {
		s, ok := st.(*model)
		if n, hidden := st.(noExtend); hidden {
			s, ok = n.s, true
		}
		if !ok {
			t.Fatalf("Delete: %T is not the model", st)
		}
		s.mu.Lock()
		delete(s.m, s.key(key))
		s.mu.Unlock()
	}}
	if !b.noInTx {
		cfg.InTx = inTx
	}
	return cfg
}

func TestModelPasses(t *testing.T) {
	Run(t, modelConfig(bugs{}))
}

func TestModelPassesOnRealClock(t *testing.T) {
	cfg := modelConfig(bugs{})
	newStore := cfg.NewStore
	cfg.NewStore = func(t testing.TB, s Setup) store.Store {
		s.Now = time.Now
		return newStore(t, s)
	}
	cfg.RealClock = true
	cfg.Tick = 30 * time.Millisecond
	Run(t, cfg)
}

// TestBrokenStoresAreCaught proves the suite can fail: each broken store
// must fail at least the cases named for it.
func TestBrokenStoresAreCaught(t *testing.T) {
	tests := []struct {
		name string
		bugs bugs
		want []string
	}{
		{"no fence bump on release", bugs{noFenceBumpOnRelease: true}, []string{"ReleaseThenReclaim", "Linearizable"}},
		{"lease-checked complete", bugs{leaseCheckedComplete: true}, []string{"LateCompleteCommits"}},
		{"non-atomic claim", bugs{nonAtomicClaim: true}, []string{"ConcurrentClaimsOneWinner", "Linearizable"}},
		{"no re-affirm on retried claim", bugs{noReaffirm: true}, []string{"RetriedClaimReaffirms", "Linearizable"}},
		{"release deletes the record", bugs{releaseDeletes: true}, []string{"ReleaseThenReclaim", "Linearizable"}},
		{"complete ignores the fence", bugs{completeIgnoresFence: true}, []string{"ZombieFencedOut", "CompleteStaleOrAbsent", "Linearizable"}},
		{"done never expires", bugs{doneNeverExpires: true}, []string{"TTLExpiryReclaims"}},
		{"extend ignores the fence", bugs{extendIgnoresFence: true}, []string{"ExtendFenced", "Linearizable"}},
		{"ignores a cancelled context", bugs{ignoresContext: true}, []string{"CancelledContext"}},
		{"truncates long keys", bugs{truncatesKeys: true}, []string{"UnusualKeys"}},
		{"accepts invalid keys", bugs{acceptsBadKeys: true}, []string{"InvalidKeys"}},
		{"no Extender", bugs{noExtend: true}, []string{"Extend", "ExtendFenced"}},
		{"re-affirms a released claim", bugs{keepsTokenOnRelease: true}, []string{"ReleasedTokenNotReaffirmed"}},
		{"decides a takeover per field", bugs{perFieldClaim: true}, []string{"LeaseEdgeTakeovers"}},
		{"keeps an old fingerprint", bugs{keepsFingerprint: true}, []string{"Fingerprints"}},
		{"keeps no origin", bugs{dropsOrigin: true}, []string{"Origins"}},
		{"names the caller's origin to a duplicate", bugs{callersOrigin: true}, []string{"Origins"}},
		{"clears the origin on Release and Forget", bugs{clearsOrigin: true}, []string{"Origins"}},
		{"keeps a released holder's origin for a winner without one", bugs{keepsOrigin: true}, []string{"Origins"}},
		{"keeps an origin CheckOrigin refuses", bugs{acceptsBadOrigin: true}, []string{"Origins"}},
		{"CompleteTx ignores the fence", bugs{txIgnoresFence: true}, []string{"TxCompleteFenced"}},
		{"CompleteTx writes outside the transaction", bugs{txOutsideTx: true}, []string{"TxCompleteRollsBack"}},
		{"CompleteTx untested (no InTx)", bugs{noInTx: true}, []string{"CompleteTxNeedsInTx"}},
		{"forget deletes the record", bugs{forgetDeletes: true}, []string{"ForgetClaimed", "ForgetDone"}},
		{"forget keeps the fence", bugs{forgetKeepsFence: true}, []string{"ForgetClaimed"}},
		{"inspect shows an expired record", bugs{inspectShowsExpired: true}, []string{"InspectExpired"}},
		{"accepts a claim that was not won", bugs{acceptsNotWon: true}, []string{"NotWonClaimRefused"}},
		{"CompleteTx completes its DONE record again", bugs{txCompletesTwice: true}, []string{"TxCompleteTwice"}},
		{"CompleteTx does not enter the transaction", bugs{txNoEnter: true}, []string{"TxCompleteEntersTx"}},
		{"fences restart once a record is deleted", bugs{fencesRestart: true}, []string{"FencesNeverRepeat"}},
		{"ignores the claim's token", bugs{ignoresTokens: true}, []string{"TokenChecked"}},
		{"accepts a lease not shorter than the ttl", bugs{acceptsLongLease: true}, []string{"LeaseNotShorterThanTTL"}},
		{"list matches a prefix anywhere in the key", bugs{listContains: true}, []string{"ListStates"}},
		{"list shows expired records", bugs{listShowsExpired: true}, []string{"ListExpired"}},
		{"list repeats a record across pages", bugs{listRepeats: true}, []string{"ListPaging"}},
		{"a counted failure keeps the fence", bugs{failKeepsFence: true}, []string{"FailCounted", "Linearizable"}},
		{"Fail ignores the claim's token", bugs{failIgnoresToken: true}, []string{"FailNotOwned"}},
		{"Complete turns FAILED into DONE", bugs{failedCompletes: true}, []string{"FailCounted", "Linearizable"}},
		{"a Claim of a released record resets the count", bugs{claimResetsCount: true}, []string{"FailCounted", "FailTakeoverCounts", "Linearizable"}},
		{"Retry frees a record in any state", bugs{retryAnyState: true}, []string{"FailRetry", "Linearizable"}},
		{"Retry keeps the count", bugs{retryKeepsCount: true}, []string{"FailRetry", "Linearizable"}},
		{"a FAILED record never expires", bugs{failedNeverExpires: true}, []string{"FailExpires"}},
		{"names a key otherwise than store.QuoteKey", bugs{namesKeyCut: true}, []string{"KeysInErrors"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failed := check(t, modelConfig(tt.bugs))
			for _, name := range tt.want {
				if failed[name] == nil {
					t.Errorf("case %s passed a store whose %s; the suite must catch it", name, tt.name)
				}
			}
			if len(failed) == 0 {
				t.Fatalf("the suite passed a store whose %s", tt.name)
			}
			for name, err := range failed {
				t.Logf("%s: %v", name, err)
			}
		})
	}
}

func TestCaseNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range names() {
		if seen[n] {
			t.Errorf("case %s is defined twice", n)
		}
		seen[n] = true
	}
}
