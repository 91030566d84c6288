package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lmittmann/tint"
)

// newLogger returns a tint handler on a terminal and JSON otherwise
// (format "auto"), or the format asked for. Every line passes through a
// redactor that masks the given secrets wherever they appear.
func newLogger(w io.Writer, format, level string, secrets []string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok && isTerminal(f) {
			format = "pretty"
		}
	}
	var h slog.Handler
	switch format {
	case "pretty":
		h = tint.NewHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly})
	case "json":
		h = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl, ReplaceAttr: durationText})
	case "text":
		h = slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})
	default:
		return nil, fmt.Errorf("--log-format %q: use auto, pretty, json or text", format)
	}
	return slog.New(redactor{h, secrets}), nil
}

// durationText writes a duration as Go writes it ("1.5s"), not as
// nanoseconds, which is how slog's JSON handler writes one otherwise.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// secretsOf returns the password in a database URL or DSN, so that it can
// be masked even in an error text a library built from it.
func secretsOf(dsn string) []string {
	var out []string
	if cfg, err := pgconn.ParseConfig(dsn); err == nil && cfg.Password != "" {
		out = append(out, cfg.Password)
	}
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			out = append(out, p, url.QueryEscape(p), url.PathEscape(p))
		}
	}
	if u, err := url.Parse(dsn); err == nil {
		if p := u.Query().Get("sslpassword"); p != "" { // the client key's
			out = append(out, p, url.QueryEscape(p), url.PathEscape(p))
		}
	}
	return out
}

// redact masks secrets in s.
func redact(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= 3 {
			s = strings.ReplaceAll(s, sec, "*****")
		}
	}
	return s
}

// redactor masks secrets in messages and attributes before they are written.
type redactor struct {
	slog.Handler
	secrets []string
}

func (r redactor) Handle(ctx context.Context, rec slog.Record) error {
	if len(r.secrets) == 0 {
		return r.Handler.Handle(ctx, rec)
	}
	out := slog.NewRecord(rec.Time, rec.Level, redact(rec.Message, r.secrets), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(r.attr(a))
		return true
	})
	return r.Handler.Handle(ctx, out)
}

func (r redactor) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, redact(v.String(), r.secrets))
	case slog.KindGroup:
		g := v.Group()
		attrs := make([]any, len(g))
		for i, ga := range g {
			attrs[i] = r.attr(ga)
		}
		return slog.Group(a.Key, attrs...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, redact(err.Error(), r.secrets))
		}
		return slog.String(a.Key, redact(fmt.Sprint(v.Any()), r.secrets))
	}
	return a
}

func (r redactor) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = r.attr(a)
	}
	return redactor{r.Handler.WithAttrs(red), r.secrets}
}

func (r redactor) WithGroup(name string) slog.Handler {
	return redactor{r.Handler.WithGroup(name), r.secrets}
}
