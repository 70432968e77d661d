"""Errors that the command line reports as one line: with exit code 2, or 75 for ``Busy`` (docs/design.md section 9)."""


class ConfigError(ValueError):
    """Bad user input: a config field, a preset name, a path or a file.

    The message is a single line that names what is wrong and what is allowed.
    """


class Busy(ConfigError):
    """What the command needs is held by another process that may still run (a run's lock): one line, with the exit
    code ``os.EX_TEMPFAIL`` (75), a temporary failure to retry later, which the workflow's record of a cell that failed
    for good leaves out (graft.workflow.failures), as it does a stopped run's."""
