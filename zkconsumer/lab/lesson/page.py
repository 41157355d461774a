"""Render a `Lesson` as one self-contained HTML page: the steps as embedded JSON, the player inlined.

    write_lesson(build_lesson(Path("results/lesson")), Path("lesson.html"))

No network is needed to open it: no CDN, no fonts, no external script. Source links are relative to where the
page is written (`../rebalance/listener.py#L305`), so they resolve from a checkout.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

from zkconsumer.lab.designs import DESIGNS, LABELS, is_zookeeper_design
from zkconsumer.lab.lesson.assets import CSS, JS
from zkconsumer.lab.lesson.kip848_steps import STATES as CONSUMER_STATES
from zkconsumer.lab.lesson.model import REPO_ROOT, Lesson
from zkconsumer.lab.sim.coordinator import COMPLETING, EMPTY, PREPARING, STABLE

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{css}</style></head>
<body>
<header><h1>{title}</h1><p>{subtitle}</p></header>
<div id="controls">
  <button id="first" title="the change">|&lt;</button><button id="prev" title="previous step (←)">◀</button>
  <button id="play" title="play / pause (space)">play</button><button id="next" title="next step (→)">▶</button>
  <button id="last" title="the end">&gt;|</button>
  <input id="slider" type="range" min="0" max="0" value="0" aria-label="step">
  <select id="speed" title="play speed"><option value="900">slow</option><option value="450" selected>normal</option>
    <option value="150">fast</option></select>
  <span id="position"></span>
</div>
<div id="current"></div>
<main class="{width}" style="grid-template-columns: repeat({columns}, minmax(0, 1fr))">
{panes}
</main>
<footer style="padding: 0 18px 18px; color: #555">{footer}</footer>
<script type="application/json" id="lesson-data">{data}</script>
<script>{js}</script>
</body></html>
"""


# One pane per design; its element ids start with the pane's id (the player looks them up so).
ZK_PANE = """<section class="pane zk {design}" id="{pane}-pane">
  <h2>{label} <small>({what}; orange dot: notified)</small></h2>
  <p class="verdict">{verdict}</p>
  <div class="counters" id="{pane}-counters"></div>
  <svg class="diagram" id="{pane}-diagram"></svg>
  <div class="cols"><div><h3>znodes</h3><pre class="tree" id="{pane}-tree"></pre></div>
  <div><h3>{owners}</h3><table id="{pane}-owners"></table></div></div>
  <h3>steps</h3><ol class="log" id="{pane}-log"></ol>
</section>"""
BROKER_PANE = """<section class="pane broker {design}" id="{pane}-pane">
  <h2>{label} <small>({what})</small></h2>
  <p class="verdict">{verdict}</p>
  <div class="counters" id="{pane}-counters"></div>
  <div>group state, {number} <b id="{pane}-generation">—</b></div>
  <div class="states" id="{pane}-state"></div>
  <svg class="diagram" id="{pane}-diagram"></svg>
  <h3>{owners}</h3><table id="{pane}-owners"></table>
  <h3>steps</h3><ol class="log" id="{pane}-log"></ol>
</section>"""
# design -> (what runs it, the owner table's heading)
WHAT = {"zk": ("this project's ZookeeperConsumerConnector", "owners"),
        "original": ("Kafka 0.8.2.2's own connector, owners read off the wire", "owners (member whose link "
                                                                                 "created the node)"),
        "coordinator": ("kafka-python; broker-side GroupCoordinator", "owners (members' assignments)"),
        "cooperative": ("librdkafka, cooperative-sticky; same GroupCoordinator", "owners (members' assignments)"),
        "consumer": ("librdkafka, group.protocol=consumer; Kafka 4", "owners (members' assignments)")}
# What each generation fixed and what it cost, one sentence each: the page's history lesson (docs/lesson.md).
VERDICTS = {
    "zk": "Kafka 0.8 (2013): no coordinator, each member computes its share from ZooKeeper; the price: every member "
          "is notified, re-reads the whole group, releases everything and races the others for owner nodes.",
    "original": "Kafka 0.8.2.2's own connector on the same ZooKeeper protocol: the reference this project's "
                "connector is measured against.",
    "coordinator": "Kafka 0.9 (2015): one broker coordinates and one leader assigns, so members cannot disagree; "
                   "the price: one round in which every member revokes everything and stops.",
    "cooperative": "Kafka 2.4 (2019, KIP-429): nobody stops, only the partitions that move are revoked; the price: "
                   "two rounds of JoinGroup/SyncGroup, each waiting for every member's heartbeat.",
    "consumer": "Kafka 4.0 (2025, KIP-848): the broker computes the assignment and only members whose partitions "
                "move revoke, with no group-wide round; the price: each member acts only at its own next heartbeat.",
}
# A broker-side pane: the group states it can show, the word for its number and its short form on a member.
CLASSIC = {"states": [EMPTY, PREPARING, COMPLETING, STABLE], "number": "generation", "unit": "gen", "short": "g"}
BROKER_KINDS = {"coordinator": CLASSIC, "cooperative": CLASSIC,
                "consumer": {"states": list(CONSUMER_STATES), "number": "group epoch", "unit": "epoch",
                             "short": "e"}}
# The coordinator pane keeps the ids it had when it was the only broker-side one (links with #coord-… stay valid).
PANE_IDS = {"coordinator": "coord"}


def pane_designs(lesson: Lesson) -> list[str]:
    """Every design the case ran, in generation order (designs.py). A lesson of one design also gets the other
    family's first pane (ours, or the eager coordinator), saying it was not run for this case."""
    shown = [d for d in DESIGNS if d in lesson.designs]
    if len(shown) == 1:
        other = "coordinator" if is_zookeeper_design(shown[0]) else "zk"
        shown = sorted([*shown, other], key=DESIGNS.index)
    return shown


def pane_info(design: str) -> dict[str, Any]:
    kind = "zk" if is_zookeeper_design(design) else "broker"
    return {"design": design, "id": PANE_IDS.get(design, design), "kind": kind, **BROKER_KINDS.get(design, {})}


def lesson_data(lesson: Lesson, page_dir: Path) -> dict[str, Any]:
    designs: dict[str, Any] = {}
    for design, replay in lesson.designs.items():
        manifest = json.loads((replay.run_dir / "manifest.json").read_text(encoding="utf-8"))
        designs[design] = {
            "initial": replay.initial, "steps": [s.to_json(page_dir) for s in replay.steps],
            "stable_s": replay.stable_s, "group": _group(replay.steps),
            "run_dir": str(replay.run_dir), "completed": bool(manifest.get("completed")),
            "bad_lines": replay.bad_lines,
        }
    change = next(iter(lesson.designs.values())).change
    what = f"{change['action']} {', '.join(change['members'])}" + (" (restart)" if change.get("restart") else "")
    return {"scenario": lesson.scenario, "case": lesson.case, "change": what, "change_step": lesson.change_index,
            "designs": designs, "timeline": lesson.timeline, "labels": LABELS,
            "panes": [pane_info(d) for d in pane_designs(lesson)]}


def _group(steps: list[Any]) -> str:
    """The ZooKeeper group name as the page's tree shows it, from the first /consumers/<group> path seen."""
    for step in steps:
        for text in (step.title, *step.detail):
            if "/consumers/" in text:
                return text.split("/consumers/", 1)[1].split("/", 1)[0]
    return "<group>"


def render(lesson: Lesson, page_dir: Path) -> str:
    data = lesson_data(lesson, page_dir)
    stable = ", ".join(f"{d}: {r.stable_s:.2f} s" if r.stable_s is not None else f"{d}: not before the next change"
                       for d, r in lesson.designs.items())
    title = f"Rebalance lesson: {lesson.scenario} / {lesson.case}, churn step {lesson.change_index}"
    designs = "both designs" if len(lesson.designs) == 2 else (
        "one design" if len(lesson.designs) == 1 else f"{len(lesson.designs)} designs")
    subtitle = (f"{data['change']} — replayed from the run's traces on {designs}; time to stable {stable}. "
                "← → step, space plays.")
    unread = {d: r.bad_lines for d, r in lesson.designs.items() if r.bad_lines}
    if unread:  # a replay short of records must say so (a torn last line of a killed member, a garbled one)
        subtitle += " Trace lines that could not be read: " + ", ".join(f"{d}: {n}" for d, n in unread.items()) + "."
    docs = Path("docs/lesson.md")
    runs = html.escape(", ".join(str(r.run_dir) for r in lesson.designs.values()))
    footer = (f"Built by <code>zkconsumer lab lesson</code> from {runs}. How the steps and the coordinator's "
              f"states are derived: <a href=\"{html.escape(_rel(REPO_ROOT / docs, page_dir))}\">docs/lesson.md</a>.")
    # `</` inside a script element would end it early: JSON allows the escaped form.
    payload = json.dumps(data, separators=(",", ":"), default=str).replace("</", "<\\/")
    panes = [_pane_html(pane) for pane in data["panes"]]
    return PAGE.format(title=html.escape(title), subtitle=html.escape(subtitle), css=CSS, js=JS, data=payload,
                       footer=footer, columns=len(panes), panes="\n".join(panes),
                       width="many" if len(panes) > 3 else "few")


def _pane_html(pane: dict[str, Any]) -> str:
    design = pane["design"]
    what, owners = WHAT[design]
    fields = {"design": design, "pane": pane["id"], "label": html.escape(LABELS[design]), "what": html.escape(what),
              "owners": html.escape(owners), "verdict": html.escape(VERDICTS[design])}
    if pane["kind"] == "zk":
        return ZK_PANE.format(**fields)
    return BROKER_PANE.format(**fields, number=html.escape(pane["number"]))


def _rel(target: Path, page_dir: Path) -> str:
    return os.path.relpath(target, page_dir)


def write_lesson(lesson: Lesson, out: Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(lesson, out.resolve().parent), encoding="utf-8")
    return out


def most_interesting(lesson: Lesson) -> int:
    """The slider position to show first in a screenshot: the most partitions unowned at once in the first design
    of the lesson (for ours, the gap the 0.8 design leaves between release and claim), with the other designs'
    state at that time."""
    best, best_score = 0, -1
    # ours first, else the original, else the first broker-side design's most unowned
    focus = next(d for d in DESIGNS if d in lesson.designs)
    for position, entry in enumerate(lesson.timeline, start=1):
        if entry["design"] != focus:
            continue
        state = lesson.designs[focus].steps[entry["index"]].state
        score = len(state.get("unowned", ())) * 10 + len(state.get("notified", ()))
        if score > best_score:
            best, best_score = position, score
    return best
