"""Lab member names, for real runs and the simulation alike.

The assignors order members by their ids as strings (0.8's range and roundrobin sort consumer ids; the coordinator's
range assignor sorts member ids), so `m10` would sort before `m2` and change who gets what at N >= 10. Names are
`m` and the index zero-padded to the widest index of the run: string order is then join order in every run.
"""

from __future__ import annotations


def name_width(largest_index: int) -> int:
    return len(str(max(largest_index, 0)))


def member_name(index: int, width: int = 1) -> str:
    return f"m{index:0{width}d}"
