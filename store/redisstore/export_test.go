package redisstore

import "context"

// DeleteRecord deletes key's record as Redis does once its expiry and
// grace have passed, and reports how many keys it deleted.
func DeleteRecord(ctx context.Context, s *Store, key string) (int64, error) {
	return s.client.Del(ctx, s.redisKey(key)).Result()
}
