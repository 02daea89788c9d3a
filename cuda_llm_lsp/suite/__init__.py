"""The kernel suite: run `bench` (and optionally the FSR loop) over a directory of kernels and
report speedups, fast_p, distance to the hardware floor and to vendor libraries."""
