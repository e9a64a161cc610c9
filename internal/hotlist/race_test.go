//go:build race

package hotlist

func init() { raceEnabled = true }
