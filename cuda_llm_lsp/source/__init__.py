"""The source model: what a `.cu` file contains (kernels, parameters, spec blocks, device unit)."""
