"""The language server: `server.py` wires one module per LSP behaviour onto the engine."""
