package storeurl

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// RedisLogger writes go-redis's own log lines to a slog.Logger at Level.
// Install it once, in main, with redis.SetLogger (one per process).
type RedisLogger struct {
	Logger *slog.Logger
	Level  slog.Level
}

// Printf logs one line of go-redis, without its "redis: " prefix.
func (l RedisLogger) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	if !l.Logger.Enabled(ctx, l.Level) {
		return
	}
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.Logger.Log(ctx, l.Level, msg, slog.String("component", "go-redis"))
}
