"""``python -m torch2trt_lite`` is the ``torch2trt-lite`` command."""

import sys

from .cli import main

sys.exit(main())
