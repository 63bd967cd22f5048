"""``python -m az.play.engine``: the USI engine (see ``az.play.engine.engine``)."""

import os
import sys

from az.play.engine.engine import main

status = main()
sys.stdout.flush()
sys.stderr.flush()
# A search or a compile in a thread cannot be interrupted; leave at once (nothing else is
# left to write: compilation-cache entries are written when compiled).
os._exit(status)
