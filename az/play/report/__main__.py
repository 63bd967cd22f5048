"""``python -m az.play.report``: the figures' command line (see ``az.play.report``)."""

import sys

from az.play.report.cli import main

sys.exit(main())
