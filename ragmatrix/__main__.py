"""`python -m ragmatrix <command>`: see ragmatrix/cli/."""

import sys

from ragmatrix.cli import main

sys.exit(main())
