package devenv

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestUpRunsStepsInOrder: steps run in order, share the Env, and the first
// failure stops the bring-up with the step's name in the error.
func TestUpRunsStepsInOrder(t *testing.T) {
	t.Parallel()
	var ran []string
	step := func(name string, err error) Step {
		return Step{Name: name, Run: func(_ context.Context, e *Env) error {
			ran = append(ran, name)
			e.DSN += name
			return err
		}}
	}
	var out bytes.Buffer
	e, err := Up(context.Background(), Options{StateDir: t.TempDir(), Out: &out},
		[]Step{step("a", nil), step("b", nil)})
	if err != nil || e.DSN != "ab" || strings.Join(ran, ",") != "a,b" {
		t.Fatalf("Up = %+v, %v; ran %v", e, err, ran)
	}
	ran = nil
	boom := errors.New("boom")
	_, err = Up(context.Background(), Options{StateDir: t.TempDir()},
		[]Step{step("a", nil), step("b", boom), step("c", nil)})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "dev b") || strings.Join(ran, ",") != "a,b" {
		t.Fatalf("failing step: %v; ran %v", err, ran)
	}
	if _, err := Up(context.Background(), Options{}, nil); err == nil {
		t.Error("Up without a state directory succeeded")
	}
}

func TestDefaultStepsOrder(t *testing.T) {
	t.Parallel()
	var names []string
	for _, s := range DefaultSteps() {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); !strings.HasPrefix(got, "cluster,database,engine") {
		t.Errorf("default steps %s: the cluster, database and engine come first", got)
	}
}

func TestNoCluster(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/none"
	if _, err := GetStatus(context.Background(), Options{StateDir: dir}); !errors.Is(err, ErrNoCluster) {
		t.Errorf("status of a missing cluster: %v", err)
	}
	if err := Stop(context.Background(), Options{StateDir: dir}); err != nil {
		t.Errorf("stop of a missing cluster: %v", err)
	}
	if err := Destroy(context.Background(), Options{StateDir: dir}); err != nil {
		t.Errorf("destroy of a missing cluster: %v", err)
	}
	if _, err := DSN(Options{StateDir: dir}, ""); !errors.Is(err, ErrNoCluster) {
		t.Errorf("dsn of a missing cluster: %v", err)
	}
}
