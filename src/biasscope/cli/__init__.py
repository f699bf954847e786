"""The command line: one small module per command over one library call each."""

from biasscope.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
