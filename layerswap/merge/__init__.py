"""Merge engine: layer swap, soups, TIES and soup-then-swap as recipes, built in memory or written to disk.

`registry` lists the merge methods (`methods/<name>.py`, one module each: parameters, checks, per-tensor
computation; TIES and DARE configure the generalized task arithmetic of `task_arithmetic`, what else two share is in
`shared`), `params` declares what a method declares and checks params against it, `schema` generates the config
schema's merge block and a config's defaults, `recipes` reads and validates recipes (`Recipe.load`: once per
recipe), `engine` builds merged state dicts and writes merged models (`layers`: the layer of a parameter name),
`merger` is the engine of one evaluation job. Each name is imported from the module that owns it (the package
re-exports nothing), so reading a config or a recipe (`params`, `recipes`) imports no torch.
"""
