package storeurl

import "context"

func openRedis(ctx context.Context, rawURL string) (*Opened, error) { return nil, errNotBuilt }
