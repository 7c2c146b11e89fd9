"""``python -m producers.backfill``: see ``producers.backfill.main``."""

import sys

from producers.backfill.main import main

sys.exit(main())
