"""The source model: what a `.cu` file contains (kernels, parameters, spec blocks, test specs).

Pure text and tree-sitter: nothing here compiles or runs. NVRTC's input (the device unit) is
built in `compile/`.
"""
