"""The lab: measuring the ZooKeeper-balanced consumer against the broker-side group coordinator."""
