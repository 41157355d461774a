"""`zkconsumer watch`: a read-only view of one ZooKeeper-based consumer group (docs/watch.md).

`model` reads a group into plain data and infers what it can (member states, lag); `live` keeps that data
current with one ZooKeeper watch per node shown; `app` is the full-screen view; `cli` the command. Nothing
here writes to ZooKeeper.
"""
