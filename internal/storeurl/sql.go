package storeurl

import "context"

func openSQL(ctx context.Context, scheme, rawURL string) (*Opened, error) { return nil, errNotBuilt }
