"""Lab scenarios: the TOML files shipped here, their model, their checks, and loading them (docs/scenarios.md)."""
