"""Errors that the command line reports as one line with exit code 2 (docs/design.md section 9)."""


class ConfigError(ValueError):
    """Bad user input: a config field, a preset name, a path or a file.

    The message is a single line that names what is wrong and what is allowed.
    """
