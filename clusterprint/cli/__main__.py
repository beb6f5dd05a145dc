"""``python -m clusterprint.cli``: the ``clusterprint`` command from a checkout never installed."""

import sys

from clusterprint.cli.main import main

sys.exit(main())
