"""The fault campaign (docs/chaos.md): generator, nemesis, history, checkers."""
