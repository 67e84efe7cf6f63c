"""The one base class of bad-input errors: the CLI prints them as one `error:` line and exits 2.

Anything else that escapes is an internal error (exit 1, `--debug` for the traceback)."""

MESSAGE_CHARS = 1000  # a message quoting a hostile file (a schema, a line of it) is cut here


def one_line(text: str, limit: int = MESSAGE_CHARS) -> str:
    """`text` on one line (every run of whitespace that holds a line break becomes one space), at most
    `limit` characters: what a bad-input message quotes from a file (an SQLite schema's syntax error
    spans lines) must not break the one-`error:`-line contract."""
    if "\n" in text or "\r" in text:
        text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class UserError(ValueError):
    """Bad usage or bad input: a missing or corrupt file, an unknown op option, a bad flag."""

    def __init__(self, *args: object) -> None:
        if len(args) == 1 and isinstance(args[0], str):
            args = (one_line(args[0]),)
        super().__init__(*args)
