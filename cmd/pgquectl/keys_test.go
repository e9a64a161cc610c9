package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/pgquectl/pgquectl/internal/config"
)

// Settings are read through their config.Key (get, isSet), never by a name
// spelled again: a viper lookup with a string literal is a key a typo
// would break silently.
func TestNoStringKeyLookups(t *testing.T) {
	t.Parallel()
	lookup := regexp.MustCompile(`\.v\.(Get\w*|IsSet)\("`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if lookup.MatchString(line) {
				t.Errorf("%s:%d: a setting read by its name as a string: declare a config.Key and use get/isSet: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// One declaration feeds the flag (name, default, help) and the read: the
// command line wins over the environment, which wins over the config file.
func TestKeyFlagEnvFile(t *testing.T) {
	k := config.Key[int]{Name: "test-knob", Default: 7, Help: "a knob"}
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("test-knob: 9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	read := func(args ...string) (int, bool) {
		a := &app{v: viper.New()}
		a.v.SetEnvPrefix("PGQUE")
		a.v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
		a.v.AutomaticEnv()
		cmd := &cobra.Command{}
		addFlag(cmd.Flags(), k)
		if err := cmd.Flags().Parse(args); err != nil {
			t.Fatal(err)
		}
		a.v.SetConfigFile(file)
		if err := a.v.ReadInConfig(); err != nil {
			t.Fatal(err)
		}
		if err := a.v.BindPFlags(cmd.Flags()); err != nil {
			t.Fatal(err)
		}
		if f := cmd.Flags().Lookup("test-knob"); f == nil || f.Usage != "a knob" || f.DefValue != "7" {
			t.Fatalf("flag %+v", f)
		}
		return get(a, k), isSet(a, k)
	}
	if v, set := read(); v != 9 || !set {
		t.Errorf("file: %d %v", v, set)
	}
	t.Setenv("PGQUE_TEST_KNOB", "11")
	if v, _ := read(); v != 11 {
		t.Errorf("env: %d", v)
	}
	if v, _ := read("--test-knob", "13"); v != 13 {
		t.Errorf("flag: %d", v)
	}
}
