"""The lesson's broker-side generations end to end: the shipped `lesson` scenario run once on the eager, the
cooperative (KIP-429) and the consumer-protocol (KIP-848) designs (real Apache Kafka 3.9 and 4.x brokers, real
kafka-python and librdkafka members, the lab's proxies), each replay checked for its protocol's shape and
against the raw traces, and the page driven in headless Chromium: three columns in generation order with their
labels and what each generation fixed and cost, every position's group state and owner table read back from the
DOM. A screenshot is saved as a test artifact."""

from __future__ import annotations

import html
import json
import linecache
import re
from pathlib import Path
from typing import Any

import pytest
from lesson_runs import LessonRuns
from test_lesson_page import CHROMIUM, ERRORS, _run_browser

from zkconsumer.lab.designs import BROKER_SIDE_DESIGNS, LABELS
from zkconsumer.lab.lesson import Lesson, build_lesson, most_interesting, write_lesson
from zkconsumer.lab.lesson.kip848_steps import UNSETTLED
from zkconsumer.lab.lesson.model import REPO_ROOT
from zkconsumer.lab.lesson.page import VERDICTS
from zkconsumer.lab.lesson.replay import load_records
from zkconsumer.lab.rules.protocol import GROUP_HEARTBEAT_API, is_coordination_request

pytestmark = pytest.mark.slow
# eager, cooperative, consumer protocol: the generations after ZooKeeper (consumer-java is the consumer protocol
# again, on Kafka's own client: the lesson replays one client per generation)
DESIGNS = [d for d in BROKER_SIDE_DESIGNS if d != "consumer-java"]


@pytest.fixture(scope="module")
def lesson(lesson_runs: LessonRuns) -> Lesson:
    """The shipped lesson scenario's runs on the three broker-side designs (tests/lesson/conftest.py: made once
    per session, the coordinator's shared with test_lesson_page.py), shared by every test here."""
    summaries = lesson_runs.summaries(DESIGNS)
    assert [s.completed for s in summaries.values()] == [True] * len(DESIGNS)
    return build_lesson(lesson_runs.view(DESIGNS))


def _window(lesson: Lesson, design: str) -> tuple[list[dict[str, Any]], float, float]:
    replay = lesson.designs[design]
    start = replay.change["ts"]
    return load_records(replay.run_dir), start, start + replay.steps[-1].t


def owners_at(records: list[dict[str, Any]], ts: float) -> dict[str, set[str]]:
    """member -> the partitions it holds, from its own `generation` records folded up to `ts` (no lesson code):
    an assignment is the whole set, a revoke or loss keeps `remaining` (absent for an eager member: nothing)."""
    held: dict[str, set[str]] = {}
    for r in records:
        if r["ts"] > ts + 1e-9:
            break
        if r["type"] == "generation":
            held[r["member"]] = set(r["partitions"] if r["kind"] == "assigned" else r.get("remaining") or ())
    return held


def _held(state: dict[str, Any]) -> dict[str, set[str]]:
    return {m: set(v["partitions"]) for m, v in state["members"].items() if v["partitions"]}


def test_every_generation_is_replayed_from_its_own_traffic(lesson: Lesson) -> None:
    assert list(lesson.designs) == DESIGNS
    assert len(lesson.timeline) == sum(len(r.steps) for r in lesson.designs.values())
    for design, replay in lesson.designs.items():
        steps = replay.steps
        assert steps[0].kind == "change" and steps[-1].kind == "stable", design
        assert [s.t for s in steps] == sorted(s.t for s in steps)
        for step in steps:  # a title, a one-line reason, and a link to the line that defines the code
            assert step.design == design and step.title and step.explain and "\n" not in step.explain
            source = linecache.getline(str(REPO_ROOT / step.code.path), step.code.line)
            assert re.match(rf"\s*(async\s+)?(def|class)\s+{re.escape(step.code.name.split('.')[-1])}\b", source), \
                (step.code, source)
        records, start, _ = _window(lesson, design)
        for step in steps:
            held = _held(step.state)
            # what each member owns after every step is what its own records say, and nobody shares a partition
            assert held == {m: p for m, p in owners_at(records, start + step.t).items() if p}, (design, step.title)
            owned = [p for parts in held.values() for p in parts]
            assert len(owned) == len(set(owned)), (design, step.title)
            assert set(step.state["unowned"]) == set(step.state["partitions"]) - set(owned)
        assert replay.steps[-1].state["unowned"] == []
        # arrows are drawn from real wire records: between the coordinator and a member of this run
        members = set(replay.steps[-1].state["members"])
        for step in steps:
            if step.arrow:
                assert {step.arrow["src"], step.arrow["dst"]} - {"coordinator"} <= members, step.arrow


def _generations_formed(steps: list[Any]) -> list[int]:
    """The generations the JoinGroup answers of a replay formed, in order, each once."""
    formed: list[int] = []
    for s in steps:
        found = re.match(r"JoinGroup ← generation (\d+)", s.title)
        if found and int(found.group(1)) not in formed:
            formed.append(int(found.group(1)))
    return formed


def test_eager_stops_everyone_in_one_round(lesson: Lesson) -> None:
    replay = lesson.designs["coordinator"]
    assert _generations_formed(replay.steps) == [replay.initial["group"]["generation"] + 1]
    incumbents = [m for m, v in replay.initial["members"].items() if v["partitions"]]
    revokes = [s for s in replay.steps if s.kind == "generation-revoked"]
    # every incumbent gives up everything: at some step all partitions are unowned at once
    assert {s.member for s in revokes} == set(incumbents)
    assert max(len(s.state["unowned"]) for s in replay.steps) == len(replay.steps[-1].state["partitions"])


def test_cooperative_takes_two_rounds_and_nobody_stops(lesson: Lesson) -> None:
    replay = lesson.designs["cooperative"]
    first = replay.initial["group"]["generation"] + 1
    assert _generations_formed(replay.steps) == [first, first + 1]  # two generations of JoinGroup
    assert [s.title for s in replay.steps if s.kind == "JoinGroup-response" and "round 1" in s.title]
    assert [s.title for s in replay.steps if s.kind == "JoinGroup-response" and "round 2" in s.title]
    joiner = replay.change["members"][0]
    formed_at = {g: next(i for i, s in enumerate(replay.steps) if s.title.startswith(f"JoinGroup ← generation {g}"))
                 for g in (first, first + 1)}
    revokes = [i for i, s in enumerate(replay.steps) if s.kind == "generation-revoked"]
    # nobody revokes before round 1 is formed; the revokes are partial and come before round 2
    assert revokes and all(formed_at[first] < i < formed_at[first + 1] for i in revokes)
    for i in revokes:
        member = replay.steps[i].member
        assert replay.steps[i].state["members"][member]["partitions"], replay.steps[i].title  # it kept some
    # no member ever owns nothing while it held partitions before: nobody stops
    for step in replay.steps:
        for member, before in replay.initial["members"].items():
            if before["partitions"] and step.state["members"][member]["phase"] != "left":
                assert step.state["members"][member]["partitions"], (member, step.title)
    # the joiner gets nothing in round 1, and the freed partitions in round 2
    gets = [s for s in replay.steps if s.kind == "generation-assigned" and s.member == joiner]
    assert gets[0].state["members"][joiner]["partitions"] == [] and gets[0].state["members"][joiner]["generation"] \
        == first
    assert gets[-1].state["members"][joiner]["partitions"] and gets[-1].state["members"][joiner]["generation"] \
        == first + 1
    states = [replay.initial["group"]["state"]] + [s.state["group"]["state"] for s in replay.steps]
    visited = [x for i, x in enumerate(states) if i == 0 or states[i - 1] != x]
    assert visited.count("CompletingRebalance") == 2, visited


def test_the_consumer_protocol_moves_partitions_in_heartbeats(lesson: Lesson) -> None:
    replay = lesson.designs["consumer"]
    joiner = replay.change["members"][0]
    kinds = {s.kind for s in replay.steps}
    assert not {k for k in kinds if k.startswith(("JoinGroup", "SyncGroup"))}  # no JoinGroup, no SyncGroup
    joins = [i for i, s in enumerate(replay.steps) if s.kind == f"{GROUP_HEARTBEAT_API}-request"
             and s.arrow["label"].startswith("heartbeat e0")]
    assert [replay.steps[i].member for i in joins] == [joiner]  # the one epoch-0 heartbeat
    # the group epoch rises at the joiner's answer and never falls; every member's epoch never falls either
    epochs = [replay.initial["group"]["generation"]] + [s.state["group"]["generation"] for s in replay.steps]
    assert epochs == sorted(epochs) and epochs[-1] > epochs[0]
    bump = next(i for i, s in enumerate(replay.steps) if s.state["group"]["generation"] > epochs[0])
    assert replay.steps[bump].member == joiner and bump > joins[0]
    for member in replay.steps[-1].state["members"]:
        seen = [s.state["members"][member]["generation"] for s in replay.steps]
        seen = [e for e in seen if e is not None]
        assert seen == sorted(seen), member
    # each incumbent that gives something up is told at its own heartbeat, revokes, then acknowledges
    targets = [i for i, s in enumerate(replay.steps) if s.state["members"].get(s.member or "", {}).get("phase")
               == "revoking" and s.kind.endswith("-response")]
    assert targets
    for i in targets:
        member = replay.steps[i].member
        revoke = next(j for j in range(i, len(replay.steps)) if replay.steps[j].kind == "generation-revoked"
                      and replay.steps[j].member == member)
        ack = next(j for j in range(revoke, len(replay.steps)) if replay.steps[j].member == member
                   and replay.steps[j].kind.endswith("-request"))
        assert "owns" in replay.steps[ack].title
    # the joiner's partitions arrive only after an incumbent freed them
    arrival = next(i for i, s in enumerate(replay.steps) if s.kind == "generation-assigned" and s.member == joiner)
    assert arrival > min(targets)
    states = [replay.initial["group"]["state"]] + [s.state["group"]["state"] for s in replay.steps]
    visited = [x for i, x in enumerate(states) if i == 0 or states[i - 1] != x]
    assert visited[:2] == ["Stable", "Reconciling"] and set(visited) <= {"Stable", "Reconciling"}
    if visited[-1] != "Stable":
        # The replay ends at the lab's own stable record: every partition owned once, by the members' records. A
        # member that lost nothing hears the new group epoch only at its next heartbeat, which may come after that;
        # then that is all the broker still waits for: nothing unowned, nobody revoking, acknowledging or waiting.
        last = replay.steps[-1].state
        assert not last["unowned"]
        behind = {m: v for m, v in last["members"].items() if v["generation"] not in (None, epochs[-1])}
        assert behind and all(v["phase"] not in UNSETTLED for v in behind.values()), behind
    records, start, end = _window(lesson, "consumer")
    sent = [r for r in records if r["type"] == "wire" and r.get("proto") == "kafka" and r["kind"] == "request"
            and start <= r["ts"] <= end and is_coordination_request(r.get("api_name"), r.get("member_epoch"),
                                                                     r.get("owned"))]
    assert replay.steps[-1].state["counters"]["coordination requests"] == len(sent) > 0


# Appended to a copy of the page: moves the slider through every position as a user does, and writes what every
# pane then shows into the DOM for --dump-dom.
DRIVER = """<script>
(function () {
  const out = [], slider = document.getElementById('slider'), panes = JSON.parse(
    document.getElementById('lesson-data').textContent).panes;
  const owners = (id) => Object.fromEntries([...document.querySelectorAll('#' + id + ' tr[data-partition]')]
    .map((tr) => [tr.dataset.partition, tr.querySelector('td.owner').textContent]));
  const headings = [...document.querySelectorAll('section.pane')].map((s) => ({
    id: s.id, h2: s.querySelector('h2').textContent, verdict: (s.querySelector('p.verdict') || {}).textContent,
    width: s.getBoundingClientRect().width}));
  for (let p = 0; p <= Number(slider.max); p++) {
    slider.value = p; slider.dispatchEvent(new Event('input'));
    const shown = {};
    for (const {design, id} of panes) {
      const box = document.getElementById(id + '-state');
      shown[design] = {state: box.dataset.state, on: box.querySelector('.on') && box.querySelector('.on').textContent,
        number: document.getElementById(id + '-generation').textContent, owners: owners(id + '-owners')};
    }
    out.push({p, shown, title: document.querySelector('#current .title').textContent});
  }
  const pre = document.createElement('pre'); pre.id = 'lesson-test-out';
  pre.textContent = JSON.stringify({max: Number(slider.max), errors: window.__errors, headings, positions: out});
  document.body.appendChild(pre);
})();
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="missing tool: headless Chromium (Debian package chromium) is not "
                                             "installed")
def test_the_page_shows_the_generations_side_by_side(lesson: Lesson, tmp_path: Path) -> None:
    page = write_lesson(lesson, tmp_path / "generations.html")
    text = page.read_text(encoding="utf-8")
    driven = tmp_path / "driven.html"
    driven.write_text(text.replace("<head>", "<head>" + ERRORS, 1).replace("</body>", DRIVER + "</body>", 1))
    result = _run_browser([f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1900,1300",
                           "--virtual-time-budget=20000", "--dump-dom", driven.as_uri()])
    found = re.search(r'<pre id="lesson-test-out">(.*?)</pre>', result.stdout, re.S)
    assert found, f"no driver output; chromium exit {result.returncode}: {result.stderr[-2000:]}"
    shown = json.loads(html.unescape(found.group(1)))
    assert shown["errors"] == [] and shown["max"] == len(lesson.timeline)

    # three columns, in generation order, each headed by its label and saying what it fixed and what it cost
    headings = shown["headings"]
    assert len(headings) == len(DESIGNS)
    assert all(h["h2"].startswith(LABELS[d] + " (") for h, d in zip(headings, DESIGNS, strict=True)), headings
    assert [h["verdict"] for h in headings] == [VERDICTS[d] for d in DESIGNS]
    assert min(h["width"] for h in headings) > 400  # side by side on a 1900 px window, none squeezed

    records = {d: _window(lesson, d) for d in DESIGNS}
    last = dict.fromkeys(DESIGNS, -1)
    for p, dom in enumerate(shown["positions"]):
        if p:
            entry = lesson.timeline[p - 1]
            last[entry["design"]] = entry["index"]
        for design in DESIGNS:
            replay = lesson.designs[design]
            state = replay.steps[last[design]].state if last[design] >= 0 else replay.initial
            pane = dom["shown"][design]
            assert pane["state"] == pane["on"] == state["group"]["state"], (p, design)
            assert pane["number"] == str(state["group"]["generation"]), (p, design)
            rows, start, _ = records[design]
            ts = start + (replay.steps[last[design]].t if last[design] >= 0 else 0.0)
            expected = {part: member for member, parts in owners_at(rows, ts).items() for part in parts}
            assert {k: v.split(" (")[0] for k, v in pane["owners"].items() if v != "none"} == expected, (p, design)
    # the slider moved every column: each pane showed more than one state and more than one owner table
    for design in DESIGNS:
        assert len({d["shown"][design]["state"] for d in shown["positions"]}) > 1, design
        assert len({json.dumps(d["shown"][design]["owners"], sort_keys=True) for d in shown["positions"]}) > 1
    assert {d["shown"]["consumer"]["state"] for d in shown["positions"]} == {"Stable", "Reconciling"}

    shot = tmp_path / "generations.png"
    result = _run_browser([f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1900,1300",
                           f"--screenshot={shot}", f"{page.as_uri()}#step={most_interesting(lesson)}"])
    assert shot.exists() and shot.stat().st_size > 10_000, result.stderr[-2000:]
    print(f"three-generation lesson page screenshot: {shot}")
