package crashloop

import (
	"errors"

	"github.com/crashloopguard/crashloop/internal/settings"
)

// Config files: every config type marshals to and from JSON through its
// table of settings (internal/settings), which marshalling, unmarshalling
// and validation all read.

// configError turns a setting that breaks its rule into a *ConfigError.
func configError(err error) error {
	var se *settings.Error
	if errors.As(err, &se) {
		return &ConfigError{Field: se.Field, Value: se.Value, Rule: se.Rule}
	}
	return err
}

// checkSettings returns a *ConfigError for the first setting, in table
// order, that breaks its rule.
func checkSettings(ss []settings.Setting) error { return configError(settings.Check(ss)) }

// decodeSettings reads a JSON object into the settings of a config (see
// settings.Decode); path names it in errors.
func decodeSettings(data []byte, path string, ss []settings.Setting) error {
	return configError(settings.Decode(data, path, ss))
}
