"""Running the CLI in-process from tests, and the one-line `error:` contract."""

from estimator.cli.main import main


def cli(capsys, *argv):
    """(exit code, stdout, stderr) of `estimate argv...`."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(code, err, fragment):
    """Bad input: exit 2 and exactly one line on stderr, starting with `error: ` and naming `fragment`."""
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert fragment in lines[0], lines[0]
