#!/usr/bin/env python3
"""Write the golden fixtures of the RLX op test suite (crates/rlx/tests/ops.rs).

    pip install -r tools/refgen/requirements.txt && python tools/refgen/gen_ops.py

Deterministic: every case draws from a generator seeded by its own name, and the .npz files
carry fixed timestamps, so a rerun with the pinned versions changes no bytes. Each family lives
in opcases/<family>.py; see opcases/common.py for the file format and README.md for which
reference produced which case.
"""

import os
import sys

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platforms", "cpu")
np.seterr(all="ignore")  # NaN and inf inputs are the point

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from opcases import common, composites, control, elementwise, kernels, movement, reduce_dot, sort_rng  # noqa: E402

FAMILIES = [elementwise, movement, sort_rng, reduce_dot, control, composites, kernels]
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "crates", "rlx", "tests", "fixtures",
                   "ops")


def main():
    reg = common.Registry()
    for fam in FAMILIES:
        fam.build(reg)
    reg.write(os.path.normpath(OUT))
    size = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"{len(reg.cases)} cases, {size / 1e6:.2f} MB in {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
