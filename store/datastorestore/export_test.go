package datastorestore

import "context"

// DeleteRecord deletes key's entity, as a TTL policy on expiresAt does.
func DeleteRecord(ctx context.Context, s *Store, key string) error {
	k, _ := s.entityKey(key)
	return s.client.Delete(ctx, k)
}
