package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/pgquectl/pgquectl/internal/config"
)

// addFlag declares k as a flag of f: its name, shorthand, default and help
// come from k's one declaration.
func addFlag[T config.Value](f *pflag.FlagSet, k config.Key[T]) {
	switch d := any(k.Default).(type) {
	case string:
		f.StringP(k.Name, k.Short, d, k.Help)
	case bool:
		f.BoolP(k.Name, k.Short, d, k.Help)
	case int:
		f.IntP(k.Name, k.Short, d, k.Help)
	case int32:
		f.Int32P(k.Name, k.Short, d, k.Help)
	case int64:
		f.Int64P(k.Name, k.Short, d, k.Help)
	case float64:
		f.Float64P(k.Name, k.Short, d, k.Help)
	case time.Duration:
		f.DurationP(k.Name, k.Short, d, k.Help)
	}
}

// get reads the setting k (flag > environment > config file > default).
// loadConfig has checked the environment and file values of the command's
// flags (checkValues), so a malformed one never reads as a silent zero here.
func get[T config.Value](a *app, k config.Key[T]) T {
	var v any
	switch any(k.Default).(type) {
	case string:
		v = a.v.GetString(k.Name)
	case bool:
		v = a.v.GetBool(k.Name)
	case int:
		v = a.v.GetInt(k.Name)
	case int32:
		v = a.v.GetInt32(k.Name)
	case int64:
		v = a.v.GetInt64(k.Name)
	case float64:
		v = a.v.GetFloat64(k.Name)
	case time.Duration:
		v = a.v.GetDuration(k.Name)
	}
	return v.(T)
}

// isSet says whether k was given (flag, environment or config file).
func isSet[T config.Value](a *app, k config.Key[T]) bool { return a.v.IsSet(k.Name) }
