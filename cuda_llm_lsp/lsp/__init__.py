"""The language server: `state` holds what it knows, `app` wires one module per LSP behaviour onto
it; features import the state and pure helpers, never each other."""
