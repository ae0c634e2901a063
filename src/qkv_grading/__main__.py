"""``python -m qkv_grading``: the instructor's command line."""

import sys

from .pipeline import main

sys.exit(main())
