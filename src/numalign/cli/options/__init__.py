"""numalign.cli.options."""
