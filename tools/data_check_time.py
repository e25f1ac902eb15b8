#!/usr/bin/env python
"""Time the before-training file check (hydra_dense.data.preflight) on generated ADE20K-style pairs.

See ``python tools/data_check_time.py --help``; the code is :mod:`hydra_dense.bench.data_check_time`.
"""

from hydra_dense.bench.data_check_time import main

if __name__ == "__main__":
    main()
