"""The orchestrator's side of each design: starting, commanding and stopping its members (docs/lab.md,
docs/coordinator.md, docs/interop.md)."""
