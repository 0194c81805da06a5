"""The command line: one module per subcommand; `main` parses the arguments first and imports what a command needs."""

from htatui.cli.main import main

__all__ = ["main"]
