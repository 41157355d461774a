"""A balanced, sticky assignment of one topic's partitions: what librdkafka's `cooperative-sticky` assignor
(src/rdkafka_sticky_assignor.c, after Kafka's `AbstractStickyAssignor`) and Kafka 4's broker-side uniform assignor
(group-coordinator's `UniformHomogeneousAssignmentBuilder`) compute for a group whose members all subscribe to the
one topic the simulation has (docs/simulation.md, "The newer protocols").

Both keep the group balanced within one partition (every member gets ⌊P/M⌋ or ⌈P/M⌉ of P partitions over M members)
and, within that, move as few partitions as possible from where they are. That minimum is what is modelled, not
either implementation's tie-breaking: which incumbent keeps an extra partition changes who revokes, not how many
partitions move or how many members revoke in a join from a balanced group.

    target = sticky_assignment(72, ["c0", "c1", "c2"], {"c0": {...}, "c1": {...}})
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence


def sticky_assignment(partitions: int, members: Sequence[str],
                      current: Mapping[str, Collection[int]]) -> dict[str, set[int]]:
    """Partitions 0..partitions-1 over `members` (in this order), each member keeping as much of `current` (member
    -> partitions it holds; members not listed hold nothing, and holders not in `members` are gone) as a balanced
    assignment allows."""
    if not members:
        return {}
    base, extra = divmod(partitions, len(members))
    held = {name: sorted(p for p in current.get(name, ()) if 0 <= p < partitions) for name in members}
    # The ⌈P/M⌉ slots go to the members that hold the most already: any other choice makes one of them give up a
    # partition that another member must then be given, one more move.
    biggest_first = sorted(range(len(members)), key=lambda i: (-len(held[members[i]]), i))
    quota = dict.fromkeys(members, base)
    for i in biggest_first[:extra]:
        quota[members[i]] = base + 1
    result: dict[str, set[int]] = {}
    taken: set[int] = set()
    for name in members:
        # Keep the lowest-numbered partitions held (a fixed rule, so the same inputs give the same target); a
        # partition another member already kept is not kept twice.
        kept = [p for p in held[name] if p not in taken][:quota[name]]
        result[name] = set(kept)
        taken.update(kept)
    free = iter(p for p in range(partitions) if p not in taken)
    for name in members:
        while len(result[name]) < quota[name]:
            result[name].add(next(free))
    return result


def minimum_moves(partitions: int, members: Sequence[str], current: Mapping[str, Collection[int]]) -> int:
    """The fewest partitions any balanced assignment over `members` must move from `current` (partitions held by
    nobody, or by a member that is gone, count as moves too): what the sticky designs are checked against."""
    if not members:
        return 0
    base, extra = divmod(partitions, len(members))
    counts = sorted((len(current.get(name, ())) for name in members), reverse=True)
    keep = sum(min(count, base + (i < extra)) for i, count in enumerate(counts))
    return partitions - keep
