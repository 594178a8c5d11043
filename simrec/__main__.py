"""``python -m simrec``: the same as the ``simrec`` command."""
import sys

from simrec.cli import main

sys.exit(main())
