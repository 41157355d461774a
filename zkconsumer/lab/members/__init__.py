"""The group's members as the lab runs them: one module per client, the process life they share, and their names
(docs/lab.md)."""
