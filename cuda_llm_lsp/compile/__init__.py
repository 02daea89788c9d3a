"""NVRTC compilation: the device unit, cubin, diagnostics and per-kernel resources; `analysis`
joins them with the source model into one file's analysis for the CLI and the server.
"""
