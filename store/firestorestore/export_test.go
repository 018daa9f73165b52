package firestorestore

import "context"

// DeleteRecord deletes key's document, as a TTL policy on expiresAt does.
func DeleteRecord(ctx context.Context, s *Store, key string) error {
	ref, _ := s.docRef(key)
	_, err := ref.Delete(ctx)
	return err
}
