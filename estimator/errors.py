"""The one base class of bad-input errors: the CLI prints them as one `error:` line and exits 2.

Anything else that escapes is an internal error (exit 1, `--debug` for the traceback)."""


class UserError(ValueError):
    """Bad usage or bad input: a missing or corrupt file, an unknown op option, a bad flag."""
