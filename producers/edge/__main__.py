"""``python -m producers.edge``: the edge service as its own process (see ``main``)."""

import sys

from producers.edge.main import main

sys.exit(main())
