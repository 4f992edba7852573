package crashloop_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/share"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// optionConstructors builds each constructor of the package with opts.
func optionConstructors(t *testing.T) []struct {
	name  string
	build func(opts ...crashloop.Option) (any, error)
} {
	return []struct {
		name  string
		build func(opts ...crashloop.Option) (any, error)
	}{
		{"NewRespawnBudget", func(opts ...crashloop.Option) (any, error) {
			return crashloop.NewRespawnBudget(crashloop.DefaultBudgetConfig(), opts...)
		}},
		{"NewChainDetector", func(opts ...crashloop.Option) (any, error) {
			return crashloop.NewChainDetector(crashloop.DefaultChainConfig(), opts...)
		}},
		{"NewRestartLoopGuard", func(opts ...crashloop.Option) (any, error) {
			return crashloop.NewRestartLoopGuard(3, time.Minute, opts...)
		}},
		{"NewFleetSupervisionPolicy", func(opts ...crashloop.Option) (any, error) {
			return crashloop.NewFleetSupervisionPolicy(crashloop.DefaultFleetConfig(), opts...)
		}},
		{"NewSupervisor", func(opts ...crashloop.Option) (any, error) {
			return crashloop.NewSupervisor(crashloop.DefaultSupervisorConfig(), opts...)
		}},
		{"NewSupervisor WithSharing", func(opts ...crashloop.Option) (any, error) {
			return newShared(crashloop.DefaultSupervisorConfig(), share.NewMemoryLedger(), opts...)
		}},
		{"NewSupervisor without sharing", func(opts ...crashloop.Option) (any, error) {
			return newShared(crashloop.DefaultSupervisorConfig(), nil, opts...)
		}},
	}
}

// Every constructor given every option: exactly those it takes succeed, and
// each other one fails with a *ConfigError naming the option, what it was
// passed to and who takes it, whatever the option's argument.
func TestOptionsThatDoNotApplyFail(t *testing.T) {
	options := []struct {
		name string
		opt  crashloop.Option
	}{
		{"WithClock", crashloop.WithClock(mockAt(testT0))},
		{"WithClock(nil)", crashloop.WithClock(nil)},
		{"WithEventHandler", crashloop.WithEventHandler(newRecorder())},
		{"WithName", crashloop.WithName("n")},
		{"WithName(\"\")", crashloop.WithName("")},
		{"WithStore", crashloop.WithStore(crashloop.NewFileStore(filepath.Join(t.TempDir(), "state.json")))},
		{"WithStore(nil)", crashloop.WithStore(nil)},
		{"WithSaveInterval", crashloop.WithSaveInterval(time.Second)},
		{"WithSaveInterval(0)", crashloop.WithSaveInterval(0)},
		{"WithSaveErrorHandler", crashloop.WithSaveErrorHandler(func(error) {})},
		{"WithSaveErrorHandler(nil)", crashloop.WithSaveErrorHandler(nil)},
		{"WithSharing(nil)", crashloop.WithSharing(nil)},
	}
	const (
		nameRule   = "passed only to NewRestartLoopGuard, NewFleetSupervisionPolicy or NewSupervisor"
		storeRule  = "passed only to NewSupervisor"
		sharedRule = "left out with WithSharing (a shared layer keeps the state of every replica, a store one process's)"
	)
	refused := func(field, ctor, rule string) *crashloop.ConfigError {
		if rule == sharedRule {
			return &crashloop.ConfigError{Field: field, Value: "passed with WithSharing", Rule: rule}
		}
		return &crashloop.ConfigError{Field: field, Value: "passed to " + ctor, Rule: rule}
	}
	storeRefusals := func(ctor, rule string) map[string]*crashloop.ConfigError {
		return map[string]*crashloop.ConfigError{
			"WithStore":                 refused("WithStore", ctor, rule),
			"WithStore(nil)":            refused("WithStore", ctor, rule),
			"WithSaveInterval":          refused("WithSaveInterval", ctor, rule),
			"WithSaveInterval(0)":       refused("WithSaveInterval", ctor, rule),
			"WithSaveErrorHandler":      refused("WithSaveErrorHandler", ctor, rule),
			"WithSaveErrorHandler(nil)": refused("WithSaveErrorHandler", ctor, rule),
		}
	}
	sharingRefused := func(m map[string]*crashloop.ConfigError, ctor string) map[string]*crashloop.ConfigError {
		m["WithSharing(nil)"] = refused("WithSharing", ctor, storeRule)
		return m
	}
	withName := func(m map[string]*crashloop.ConfigError, ctor string) map[string]*crashloop.ConfigError {
		m["WithName"] = refused("WithName", ctor, nameRule)
		m["WithName(\"\")"] = refused("WithName", ctor, nameRule)
		return m
	}
	// want[constructor][option] is the error; an option not listed succeeds.
	want := map[string]map[string]*crashloop.ConfigError{
		"NewRespawnBudget":              sharingRefused(withName(storeRefusals("NewRespawnBudget", storeRule), "NewRespawnBudget"), "NewRespawnBudget"),
		"NewChainDetector":              sharingRefused(withName(storeRefusals("NewChainDetector", storeRule), "NewChainDetector"), "NewChainDetector"),
		"NewRestartLoopGuard":           sharingRefused(storeRefusals("NewRestartLoopGuard", storeRule), "NewRestartLoopGuard"),
		"NewFleetSupervisionPolicy":     sharingRefused(storeRefusals("NewFleetSupervisionPolicy", storeRule), "NewFleetSupervisionPolicy"),
		"NewSupervisor":                 {},
		"NewSupervisor WithSharing":     storeRefusals("NewSupervisor", sharedRule),
		"NewSupervisor without sharing": {},
	}
	for _, c := range optionConstructors(t) {
		for _, o := range options {
			t.Run(c.name+"/"+o.name, func(t *testing.T) {
				got, err := c.build(o.opt)
				wantErr, ok := want[c.name][o.name]
				if !ok {
					require.NoError(t, err)
					assert.NotNil(t, got)
					return
				}
				require.ErrorIs(t, err, crashloop.ErrInvalidConfig)
				var ce *crashloop.ConfigError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, wantErr, ce)
				assert.Equal(t, "crashloop: invalid configuration: "+wantErr.Field+" = "+wantErr.Value.(string)+": must be "+wantErr.Rule, err.Error())
			})
		}
	}
}

// The message of a refused option says which option, where it was passed
// and where it belongs.
func TestOptionRefusalMessage(t *testing.T) {
	_, err := crashloop.NewRespawnBudget(crashloop.DefaultBudgetConfig(), crashloop.WithStore(crashloop.NewFileStore(filepath.Join(t.TempDir(), "s.json"))))
	require.EqualError(t, err, "crashloop: invalid configuration: WithStore = passed to NewRespawnBudget: must be passed only to NewSupervisor")
	_, err = newShared(crashloop.DefaultSupervisorConfig(), share.NewMemoryLedger(), crashloop.WithSaveInterval(time.Minute))
	require.EqualError(t, err, "crashloop: invalid configuration: WithSaveInterval = passed with WithSharing: "+
		"must be left out with WithSharing (a shared layer keeps the state of every replica, a store one process's)")
}

// A nil Option is ignored by every constructor, wherever it stands; the
// first option refused, in the order given, is the one reported, after any
// invalid setting of the configuration.
func TestOptionsNilAndOrder(t *testing.T) {
	for _, c := range optionConstructors(t) {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.build(nil, crashloop.WithClock(mockAt(testT0)), nil, crashloop.WithEventHandler(newRecorder()), nil)
			require.NoError(t, err)
			assert.NotNil(t, got)
		})
	}

	_, err := crashloop.NewChainDetector(crashloop.DefaultChainConfig(), crashloop.WithClock(nil), nil,
		crashloop.WithSaveErrorHandler(nil), crashloop.WithName("n"), crashloop.WithStore(nil))
	var ce *crashloop.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, &crashloop.ConfigError{Field: "WithSaveErrorHandler", Value: "passed to NewChainDetector", Rule: "passed only to NewSupervisor"}, ce)

	budget := crashloop.DefaultBudgetConfig()
	budget.MaxRespawns = -1
	_, err = crashloop.NewRespawnBudget(budget, crashloop.WithStore(nil))
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "max_respawns", ce.Field, "the configuration is checked first")

	sup := crashloop.DefaultSupervisorConfig()
	sup.HealthyAfter = -1
	_, err = newShared(sup, share.NewMemoryLedger(), crashloop.WithStore(nil))
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "healthy_after", ce.Field, "the configuration is checked first")
}

// A refused option leaves no trace: the ledger is not opened.
func TestSharedRefusedOptionOpensNoLedger(t *testing.T) {
	l := &openCounter{Ledger: share.NewMemoryLedger()}
	_, err := newShared(crashloop.DefaultSupervisorConfig(), l, crashloop.WithStore(nil))
	require.True(t, errors.Is(err, crashloop.ErrInvalidConfig))
	assert.Zero(t, l.opens)
	_, err = newShared(crashloop.DefaultSupervisorConfig(), l, crashloop.WithName("fleet-a"))
	require.NoError(t, err)
	assert.Equal(t, 1, l.opens)
}

type openCounter struct {
	share.Ledger
	opens int
}

func (l *openCounter) Open(cfg crashloop.SupervisorConfig, learn func(share.Change)) error {
	l.opens++
	return l.Ledger.Open(cfg, learn)
}
