"""A lab run and a session of them: the servers, one case on one design with its states, the load, and the summary
(docs/lab.md, docs/traces.md)."""
