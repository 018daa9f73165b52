package sqlstore

// OutboxTable returns the name of s's outbox table.
func OutboxTable(s *Store) string { return s.ob.table.String() }
