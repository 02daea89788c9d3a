"""NVRTC compilation: device unit -> cubin, diagnostics and per-kernel resources."""
