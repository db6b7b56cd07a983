"""Remote devices on Ray: a partition runs in a Ray actor that compiles it with a named backend on
its node (see docs/distributed.md).

    exe = glow.compile(model, devices=["a=ray:cpu/node_a@512MiB", "b=ray:cpu/node_b@512MiB"])
"""
