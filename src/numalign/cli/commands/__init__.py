"""numalign.cli.commands."""
