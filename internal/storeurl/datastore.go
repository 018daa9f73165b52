package storeurl

import "context"

func openDatastore(ctx context.Context, rawURL string) (*Opened, error) { return nil, errNotBuilt }
