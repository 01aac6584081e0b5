"""`python -m plugin <command>`: see plugin/cli/."""

import sys

from plugin.cli import main

sys.exit(main())
