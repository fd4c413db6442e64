"""experiments/ tests (not run by CI: ``python3 -m pytest experiments/tests``): the experiment modules
are imported as the scripts import them, from their own folder."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
