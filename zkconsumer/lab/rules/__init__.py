"""What runs are counted and judged by, each rule defined once: the protocol's counting rules, the join formula, the
protocol identities, counting gaps, connection losses, time to notice, hand-over cost, and the shipped settings
(docs/join-cost.md, docs/lab.md)."""
