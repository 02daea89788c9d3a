"""The device unit's stages (`compile.device_unit` is their one door), in pipeline order:
`includes` -> `blanking` -> `walker` -> `nodes` | `masks` -> `ranges` | `known` | `common`.

Package-private: only `compile.device_unit` imports these modules, and a stage imports only the
stages below it (an import-linter contract in pyproject.toml)."""
