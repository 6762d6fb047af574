"""nmtfrag: adapt neural machine translation to confidential data.

Stages are plain functions in their own modules (see docs/develop.md); `nmtfrag.cli` is a thin
command-line layer over them.
"""
__version__ = "0.1.0"
