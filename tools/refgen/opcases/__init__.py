"""Golden op cases for RLX, one module per op family (see ../gen_ops.py)."""
