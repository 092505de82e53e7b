"""Compilation: what counts as a compile error, a candidate's launches also compiled for CUDA on the CPU,
the compiler's copy of Triton, and Triton's C helpers built once per worker."""
