package example

import (
	"io"
	"log/slog"
)

// NewLogger returns a JSON logger whose fields Cloud Logging understands:
// the level is written as "severity" and the text as "message".
func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.LevelKey:
				a.Key = "severity"
				if l, ok := a.Value.Any().(slog.Level); ok && l == slog.LevelWarn {
					a.Value = slog.StringValue("WARNING")
				}
			case slog.MessageKey:
				a.Key = "message"
			}
			return a
		},
	}))
}

// LogFailure writes err, which stopped a command, as one ERROR line msg in
// the format of NewLogger, so that a JSON log stays JSON to its last line
// (even when the configuration, the log level included, was refused).
func LogFailure(w io.Writer, msg string, err error) {
	NewLogger(w, slog.LevelInfo).Error(msg, slog.String("error", err.Error()))
}

// WarnSingleInstance logs, when the store is the process's own memory,
// that the service must run as one instance: another instance sees none of
// its records, so a redelivery that reaches it runs the work again.
func WarnSingleInstance(log *slog.Logger, isMemory bool) {
	if isMemory {
		log.Warn("memory:// store: one instance only; another instance sees none of its records, so a redelivery there runs the work again (set IDEMGATE_STORE to a shared store)")
	}
}
