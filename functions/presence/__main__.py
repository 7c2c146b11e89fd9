"""``python -m functions.presence``: the presence API with settings from the environment."""

import sys

from functions.presence.main import serve

sys.exit(serve())
