"""One module per merge method, each declaring its `METHODS` (layerswap.merge.params.Method): name, table label,
parameters, inputs, base, checks and per-tensor computation. Registered in `layerswap/merge/registry.py`."""
