package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Value is what a setting holds.
type Value interface {
	string | bool | int | int32 | int64 | float64 | time.Duration
}

// EnvPrefix starts every setting's environment variable.
const EnvPrefix = "PGQUE_"

// Key is one setting, declared once with its name, default and help. The
// name is the config-file key, the environment variable (EnvPrefix + the
// name upper-cased, "-" → "_") and, when a command declares it as one, the
// flag --name. Code reads a setting through its Key, never through the name
// spelled again: a misspelled key does not compile.
type Key[T Value] struct {
	Name    string
	Short   string // one-letter flag shorthand, optional
	Default T
	Help    string
}

// Env is k's environment variable, e.g. PGQUE_LISTEN.
func (k Key[T]) Env() string { return EnvName(k.Name) }

// EnvName is the environment variable of the setting name.
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Source is where settings come from: cmd/pgquectl's viper (flags, the
// environment, the config file). Nothing in internal/ reads those itself.
type Source interface {
	IsSet(key string) bool
	Get(key string) any
}

// Lookup returns k's value from s, or k.Default when s has none. A value
// that is not a valid T (a config-file or environment string) is an error
// naming the key and its environment variable: never a silent zero.
func (k Key[T]) Lookup(s Source) (T, error) {
	if !s.IsSet(k.Name) {
		return k.Default, nil
	}
	raw := s.Get(k.Name)
	if v, ok := raw.(T); ok {
		return v, nil
	}
	v, err := parse[T](fmt.Sprint(raw))
	if err != nil {
		return k.Default, fmt.Errorf("%s = %q (config file, or %s): %w", k.Name, fmt.Sprint(raw), k.Env(), err)
	}
	return v, nil
}

// parse reads s as a T.
func parse[T Value](s string) (T, error) {
	var zero T
	var v any
	var err error
	switch any(zero).(type) {
	case string:
		v = s
	case bool:
		v, err = strconv.ParseBool(s)
	case int:
		v, err = strconv.Atoi(s)
	case int32:
		var n int64
		n, err = strconv.ParseInt(s, 10, 32)
		v = int32(n)
	case int64:
		v, err = strconv.ParseInt(s, 10, 64)
	case float64:
		v, err = strconv.ParseFloat(s, 64)
	case time.Duration:
		v, err = time.ParseDuration(s)
	}
	if err != nil {
		return zero, fmt.Errorf("not a valid %s", typeName[T]())
	}
	return v.(T), nil
}

// typeName names T for an error message.
func typeName[T Value]() string {
	var zero T
	switch any(zero).(type) {
	case time.Duration:
		return "duration (e.g. 30s, 500ms)"
	case bool:
		return "boolean (true or false)"
	case int, int32, int64:
		return "whole number"
	case float64:
		return "number"
	}
	return "string"
}

// FormatValue renders a setting's value as a config file takes it
// (durations without trailing zero units: 1m, not 1m0s).
func FormatValue[T Value](v T) string {
	if d, ok := any(v).(time.Duration); ok {
		s := d.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	}
	return fmt.Sprint(v)
}
