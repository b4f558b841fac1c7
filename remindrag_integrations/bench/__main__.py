"""``python -m remindrag_integrations.bench``."""

import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
