"""``python -m logserver``."""

import sys

from logserver.cli import main

sys.exit(main())
