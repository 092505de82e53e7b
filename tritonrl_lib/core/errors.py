"""The settings' error: a profile or override that does not fit, with the fix in its message."""


class ConfigError(ValueError):
    """A profile or override that does not fit RunConfig; the message says how to fix it."""
