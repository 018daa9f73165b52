package memstore

// Sweep drops every expired record at once, as a shard's sweep drops them.
func Sweep(s *Store) {
	now := s.now().UnixNano()
	for i := range s.shard {
		sh := &s.shard[i]
		sh.mu.Lock()
		for k, r := range sh.m {
			if now >= r.expiresAt {
				delete(sh.m, k)
			}
		}
		sh.mu.Unlock()
	}
}
