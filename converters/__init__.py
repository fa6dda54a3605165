"""Built-in converters, one module per op family. Importing this package registers them all."""

from __future__ import annotations  # noqa: I001 (one import line per family: merge-friendly)

from . import activation  # noqa: F401
from . import elementwise  # noqa: F401
from . import unary  # noqa: F401
from . import shape  # noqa: F401
from . import softmax  # noqa: F401
from . import reduce  # noqa: F401
from . import indexing  # noqa: F401
from . import types  # noqa: F401
from . import conv  # noqa: F401
from . import dropout  # noqa: F401
from . import linear  # noqa: F401
from . import normalization  # noqa: F401
from . import pooling  # noqa: F401
from . import resize  # noqa: F401
from . import attention  # noqa: F401
from . import embedding  # noqa: F401
from . import recurrent  # noqa: F401
from . import zoo_transformers  # noqa: F401
from . import quantization  # noqa: F401
from . import accumulate  # noqa: F401
from . import assertions  # noqa: F401
from . import detection  # noqa: F401
from . import datadep  # noqa: F401
from . import zoo_torchvision  # noqa: F401
