"""``python -m functions.register.facility``: the facility service until SIGTERM."""

import sys

from functions.register.facility.main import main

sys.exit(main())
