package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// ComponentKey is the attribute that names the component a logger belongs
// to (logger.With(ComponentKey, "replicator")); per-component levels key
// on it.
const ComponentKey = "component"

// NewLogger returns a logger writing text or JSON to w. spec is a default
// level optionally followed by per-component levels, comma-separated:
// "info", "warn,replicator=debug,raft-transport=error". Components are
// the values of the ComponentKey attribute.
func NewLogger(w io.Writer, spec, format string) (*slog.Logger, error) {
	def, per, err := ParseLevels(spec)
	if err != nil {
		return nil, err
	}
	lowest := def
	for _, l := range per {
		lowest = min(lowest, l)
	}
	opts := &slog.HandlerOptions{Level: lowest}
	var h slog.Handler
	switch strings.ToLower(format) {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	if len(per) == 0 {
		return slog.New(h), nil
	}
	return slog.New(&levelHandler{inner: h, def: def, per: per, level: def}), nil
}

// ParseLevels parses a level spec (see NewLogger).
func ParseLevels(spec string) (def slog.Level, per map[string]slog.Level, err error) {
	parts := strings.Split(spec, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		name, lv, hasName := strings.Cut(p, "=")
		if !hasName {
			lv, name = name, ""
		}
		var l slog.Level
		if e := l.UnmarshalText([]byte(strings.TrimSpace(lv))); e != nil || (hasName && strings.TrimSpace(name) == "") {
			return 0, nil, fmt.Errorf("--log-level %q: part %d %q: want LEVEL or COMPONENT=LEVEL with LEVEL debug, info, warn or error", spec, i+1, p)
		}
		if !hasName {
			if i != 0 {
				return 0, nil, fmt.Errorf("--log-level %q: part %d %q: the default level comes first", spec, i+1, p)
			}
			def = l
			continue
		}
		if i == 0 {
			def = slog.LevelInfo
		}
		if per == nil {
			per = map[string]slog.Level{}
		}
		per[strings.TrimSpace(name)] = l
	}
	return def, per, nil
}

// levelHandler applies the level of the logger's component.
type levelHandler struct {
	inner slog.Handler
	def   slog.Level
	per   map[string]slog.Level
	level slog.Level // of the component this handler's attributes name
}

func (h *levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.inner.Enabled(ctx, l)
}

func (h *levelHandler) Handle(ctx context.Context, r slog.Record) error {
	// A component given on the record itself rather than by With.
	drop := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == ComponentKey {
			if l, ok := h.per[a.Value.String()]; ok && r.Level < l {
				drop = true
			}
			return false
		}
		return true
	})
	if drop {
		return nil
	}
	return h.inner.Handle(ctx, r)
}

func (h *levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.inner = h.inner.WithAttrs(as)
	for _, a := range as {
		if a.Key == ComponentKey {
			if l, ok := h.per[a.Value.String()]; ok {
				c.level = l
			} else {
				c.level = h.def
			}
		}
	}
	return &c
}

func (h *levelHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.inner = h.inner.WithGroup(name)
	return &c
}
