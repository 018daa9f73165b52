package storeurl

import "context"

func openFirestore(ctx context.Context, rawURL string) (*Opened, error) { return nil, errNotBuilt }
