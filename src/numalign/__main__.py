"""`python -m numalign`: the same command line as the `numalign` script (where the script is not on
PATH, or to pick the interpreter)."""

from numalign.cli.main import main

raise SystemExit(main())
