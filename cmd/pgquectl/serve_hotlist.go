package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pgquectl/pgquectl/internal/config"
	"github.com/pgquectl/pgquectl/internal/hotlist"
)

// addRemovedHotlistFlags keeps the hot-list tunables' former flags
// (--hotlist-shards, ...) as hidden flags that only fail: given on the
// command line, serve stops with an error naming the config-file key that
// replaces the flag, rather than "unknown flag" or a silent ignore. They
// take any value, so "--hotlist-shards N" parses far enough to say so.
// The tunables that became fixed (config.HotlistFixed) fail likewise,
// saying the value the hot-list uses.
func addRemovedHotlistFlags(f *pflag.FlagSet) {
	for _, t := range slices.Concat(config.Hotlist, config.HotlistFixed) {
		f.String(t.Name(), "", "removed")
		_ = f.MarkHidden(t.Name())
	}
}

// removedHotlistFlags fails when a former hot-list flag was given.
func removedHotlistFlags(cmd *cobra.Command) error {
	var errs []error
	given := func(t config.Tunable) (string, bool) {
		f := cmd.Flags().Lookup(t.Name())
		if f == nil || !f.Changed {
			return "", false
		}
		return f.Value.String(), true
	}
	for _, t := range config.Hotlist {
		if v, ok := given(t); ok {
			errs = append(errs, fmt.Errorf("--%s is no longer a flag: set %q in the config file (%s, or --config FILE) or %s=%s in the environment (%s)",
				t.Name(), t.Name()+": "+v, defaultConfigFile, t.Env(), v, config.HotlistReferencePath))
		}
	}
	for _, t := range config.HotlistFixed {
		if _, ok := given(t); ok {
			errs = append(errs, fmt.Errorf("--%s was removed: the hot-list uses %s, nothing replaces it; drop the flag (%s)",
				t.Name(), t.DefaultText(), config.HotlistReferencePath))
		}
	}
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	return nil
}

// hotlistOptions reads the hot-list's tunables from the environment and the
// config file (internal/config.Hotlist).
func hotlistOptions(cmd *cobra.Command, a *app) (hotlist.Options, error) {
	if err := removedHotlistFlags(cmd); err != nil {
		return hotlist.Options{}, err
	}
	o, err := config.HotlistOptions(a.v)
	if err != nil {
		return o, usagef("hot-list configuration (%s): %w", config.HotlistReferencePath, err)
	}
	return o, nil
}
