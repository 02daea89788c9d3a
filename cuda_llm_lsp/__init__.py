"""cuda-llm-lsp: a language server and CLI that compile, check, benchmark and optimize kernels."""

__version__ = "0.1.0"
