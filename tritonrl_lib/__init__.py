"""tritonrl: teach language models to write fast, correct Triton kernels."""

__version__ = "0.1.0"
