"""Errors that the CLI turns into exit codes (2: bad usage or input, 1: internal)."""


class InputError(Exception):
    """Bad input or usage the user can fix: reported as one `error:` line, exit 2."""
