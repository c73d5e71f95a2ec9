"""``python -m leanloop``: the command line."""

import sys

from leanloop.cli.app import main

sys.exit(main())
