"""``python -m torch2trt_lite.cli`` is the ``torch2trt-lite`` command (as ``python -m torch2trt_lite``)."""

import sys

from torch2trt_lite.cli import main

sys.exit(main())
