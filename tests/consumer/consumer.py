"""The installed Python package works from the prefix it was installed into (./tg test).

Usage: PYTHONPATH=<site> /usr/bin/python3 consumer.py <site>
"""
import os
import sys

import numpy as np

import tracegraph as tg

site = os.path.realpath(sys.argv[1])
where = os.path.realpath(tg.__file__)
if not where.startswith(site + os.sep):
    sys.exit(f"consumer.py: imported tracegraph from {where}, not from the installed {site}")
x = np.arange(6, dtype=np.float32).reshape(2, 3)
y = tg.nn.relu(tg.matmul(tg.constant(x), tg.ones([3, 2])) - 4.0)
np.testing.assert_allclose(y.numpy(), np.maximum(x @ np.ones((3, 2), np.float32) - 4.0, 0))
print("consumer.py: tracegraph", tg.__version__, "from", os.path.dirname(where), "->", y.numpy().tolist())
