"""The lesson page end to end: the shipped `lesson` scenario run once on both designs (real ZooKeeper, Apache
Kafka and member processes), the step builder checked against the raw traces, and the page driven in headless
Chromium: the slider moved through every step while the state machine box and both owner tables are read back
from the DOM and compared with what the traces say. A screenshot of the page is saved as a test artifact."""

from __future__ import annotations

import html
import json
import linecache
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from lesson_runs import LessonRuns

from zkconsumer.lab.lesson import Lesson, build_lesson, most_interesting, write_lesson
from zkconsumer.lab.lesson.model import REPO_ROOT, short_thread
from zkconsumer.lab.lesson.replay import load_records
from zkconsumer.lab.scenarios.loading import shipped_scenario

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BROWSER_TIMEOUT_S = 90.0


@pytest.fixture(scope="module")
def lesson_run(lesson_runs: LessonRuns) -> Path:
    """The shipped lesson scenario's runs on both designs (tests/lesson/conftest.py: made once per session, the
    coordinator's shared with test_lesson_generations.py), shared by every test of this module."""
    summaries = lesson_runs.summaries(["zk", "coordinator"])
    assert [s.completed for s in summaries.values()] == [True, True]
    return lesson_runs.view(["zk", "coordinator"])


@pytest.fixture(scope="module")
def lesson(lesson_run: Path) -> Lesson:
    return build_lesson(lesson_run)


def _window(lesson: Lesson, design: str) -> tuple[list[dict[str, Any]], float, float]:
    replay = lesson.designs[design]
    records = load_records(replay.run_dir)
    start = replay.change["ts"]
    return records, start, start + replay.steps[-1].t


def zk_owners_at(records: list[dict[str, Any]], ts: float) -> dict[str, str]:
    """Owner nodes from the members' own claim/release/rollback events, folded up to `ts` (no lesson code)."""
    owners: dict[str, str] = {}
    for r in records:
        if r["ts"] > ts + 1e-9:
            break
        if r["type"] != "member_event" or r["kind"] not in ("claim", "release", "rollback"):
            continue
        p = f"{r['topic']}/{r['partition']}"
        if r["kind"] == "claim" and r.get("ok"):
            owners[p] = short_thread(r["thread"])
        elif r["kind"] == "release" or (r["kind"] == "rollback" and owners.get(p, "").startswith(r["member"] + "-")):
            owners.pop(p, None)
    return owners


def coordinator_owners_at(records: list[dict[str, Any]], ts: float) -> dict[str, str]:
    """partition -> "member (gen g)" from the members' generation records folded up to `ts`."""
    held: dict[str, tuple[int, list[str]]] = {}
    for r in records:
        if r["ts"] > ts + 1e-9:
            break
        if r["type"] == "generation":
            held[r["member"]] = (r["generation"], r["partitions"] if r["kind"] == "assigned" else [])
    return {p: f"{m} (gen {g})" for m, (g, parts) in held.items() for p in parts}


def test_the_step_builder_follows_the_traces(lesson: Lesson) -> None:
    assert set(lesson.designs) == {"zk", "coordinator"}
    for design, replay in lesson.designs.items():
        steps = replay.steps
        assert steps[0].kind == "change" and any(s.kind == "stable" for s in steps), design
        assert [s.t for s in steps] == sorted(s.t for s in steps)
        for step in steps:  # every link names the line where the function or class is defined
            assert step.code is not None and step.title and step.explain
            source = linecache.getline(str(REPO_ROOT / step.code.path), step.code.line)
            assert re.match(rf"\s*(async\s+)?(def|class)\s+{re.escape(step.code.name.split('.')[-1])}\b", source), \
                (step.code, source)
    assert len(lesson.timeline) == sum(len(r.steps) for r in lesson.designs.values())

    # ZooKeeper design: owners after every step as the members' events say; counters as the proxy saw them
    records, start, end = _window(lesson, "zk")
    for step in lesson.designs["zk"].steps:
        ts = start + step.t
        assert {p: n["thread"] for p, n in step.state["owners"].items()} == zk_owners_at(records, ts), step.title
    window = [r for r in records if r["type"] == "wire" and r.get("proto") == "zk" and start <= r["ts"] <= end]
    final = lesson.designs["zk"].steps[-1].state["counters"]
    assert final["ZooKeeper requests"] == sum(r["kind"] == "request" for r in window) > 0
    notifications = [s for s in lesson.designs["zk"].steps if s.kind == "notify"]
    assert final["watch notifications"] == len(notifications) == sum(r["kind"] == "event" for r in window)
    initial_members = shipped_scenario("lesson").group.members
    assert {s.member for s in notifications} == {f"m{i}" for i in range(initial_members)}  # the fan-out
    # a notification comes after the write that fires it: the joiner's registration is in /ids before any
    # incumbent hears of it, and nobody has been notified at the change or before the first notification
    steps = lesson.designs["zk"].steps
    joiner = lesson.designs["zk"].change["members"][0]
    register = next(i for i, s in enumerate(steps) if s.kind == "register" and s.member == joiner)
    first = steps.index(notifications[0])
    assert register < first and joiner in steps[first].state["ids"]
    assert lesson.designs["zk"].initial["notified"] == [] and all(not s.state["notified"] for s in steps[:first])
    assert steps[first].state["notified"] == [notifications[0].member]
    assert max(s.state["counters"]["partitions unowned"] for s in lesson.designs["zk"].steps) > 0
    assert final["partitions unowned"] == 0

    # coordinator design: Stable -> PreparingRebalance -> CompletingRebalance -> Stable, one generation more
    replay = lesson.designs["coordinator"]
    states = [replay.initial["group"]["state"]] + [s.state["group"]["state"] for s in replay.steps]
    visited = [x for i, x in enumerate(states) if i == 0 or states[i - 1] != x]
    assert visited == ["Stable", "PreparingRebalance", "CompletingRebalance", "Stable"]
    records, start, end = _window(lesson, "coordinator")
    # the lesson's window: a member still running after the run's end (a slow leave) can form one more generation
    assigned = [r["generation"] for r in records
                if r["type"] == "generation" and r["kind"] == "assigned" and r["ts"] <= end]
    assert replay.steps[-1].state["group"]["generation"] == max(assigned) == replay.initial["group"]["generation"] + 1
    coordination = [r for r in records if r["type"] == "wire" and r.get("proto") == "kafka" and r["kind"] == "request"
                    and r.get("api_name") in ("JoinGroup", "SyncGroup", "LeaveGroup") and start <= r["ts"] <= end]
    assert replay.steps[-1].state["counters"]["coordination requests"] == len(coordination) > 0


def _run_browser(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Chromium in its own process group, which is killed whatever happens (helpers included)."""
    proc = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                             "--no-first-run", "--mute-audio", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=BROWSER_TIMEOUT_S)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


# Appended to a copy of the page: moves the slider through every position the way a user does (an `input`
# event on the range), and writes what the page then shows into the DOM for --dump-dom.
DRIVER = """<script>
(function () {
  const out = [], slider = document.getElementById('slider');
  const owners = (id) => Object.fromEntries([...document.querySelectorAll('#' + id + ' tr[data-partition]')]
    .map((tr) => [tr.dataset.partition, tr.querySelector('td.owner').textContent]));
  for (let p = 0; p <= Number(slider.max); p++) {
    slider.value = p; slider.dispatchEvent(new Event('input'));
    const box = document.getElementById('coord-state');
    out.push({p, position: document.getElementById('position').textContent, state: box.dataset.state,
      on: box.querySelector('.on') && box.querySelector('.on').textContent, generation: box.dataset.generation,
      zk: owners('zk-owners'), coordinator: owners('coord-owners'), original: owners('original-owners'),
      panes: document.querySelectorAll('section.pane').length,
      zkDots: document.querySelectorAll('#zk-diagram circle').length,
      title: document.querySelector('#current .title').textContent});
  }
  const zkLog = [...document.querySelectorAll('#zk-log li')].map((li) => li.textContent);
  const pre = document.createElement('pre'); pre.id = 'lesson-test-out';
  pre.textContent = JSON.stringify({max: Number(slider.max), errors: window.__errors, positions: out, zkLog});
  document.body.appendChild(pre);
})();
</script>"""
ERRORS = "<script>window.__errors = []; addEventListener('error', (e) => __errors.push(String(e.message)));</script>"


needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="missing tool: headless Chromium (Debian package "
                                                             "chromium) is not installed")


@needs_chromium
def test_the_page_replays_every_step_in_chromium(lesson: Lesson, tmp_path: Path) -> None:
    page = write_lesson(lesson, tmp_path / "lesson.html")
    text = page.read_text(encoding="utf-8")
    assert "http://" not in text.replace("http://www.w3.org/", "") and "https://" not in text  # no network needed
    driven = tmp_path / "driven.html"
    driven.write_text(text.replace("<head>", "<head>" + ERRORS, 1).replace("</body>", DRIVER + "</body>", 1))
    result = _run_browser([f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=20000",
                           "--dump-dom", driven.as_uri()])
    found = re.search(r'<pre id="lesson-test-out">(.*?)</pre>', result.stdout, re.S)
    assert found, f"no driver output; chromium exit {result.returncode}: {result.stderr[-2000:]}"
    shown = json.loads(html.unescape(found.group(1)))
    assert shown["errors"] == [] and shown["max"] == len(lesson.timeline)

    zk_records, zk_start, _ = _window(lesson, "zk")
    co_records, co_start, _ = _window(lesson, "coordinator")
    last = {"zk": -1, "coordinator": -1}
    for p, dom in enumerate(shown["positions"]):
        if p:
            entry = lesson.timeline[p - 1]
            last[entry["design"]] = entry["index"]
        zk_ts = zk_start + (lesson.designs["zk"].steps[last["zk"]].t if last["zk"] >= 0 else 0.0)
        co_ts = co_start + (lesson.designs["coordinator"].steps[last["coordinator"]].t if last["coordinator"] >= 0
                            else 0.0)
        zk_expected = zk_owners_at(zk_records, zk_ts) if last["zk"] >= 0 else zk_owners_at(zk_records, zk_start)
        assert {k: v for k, v in dom["zk"].items() if v != "none"} == zk_expected, (p, dom["title"])
        assert {k: v for k, v in dom["coordinator"].items() if v != "none"} == coordinator_owners_at(co_records,
                                                                                                    co_ts), p
        replay = lesson.designs["coordinator"]
        group = (replay.steps[last["coordinator"]].state if last["coordinator"] >= 0 else replay.initial)["group"]
        assert dom["state"] == dom["on"] == group["state"], (p, dom["title"])
        assert dom["generation"] == str(group["generation"]), p
    assert {d["state"] for d in shown["positions"]} >= {"Stable", "PreparingRebalance", "CompletingRebalance"}
    assert len({json.dumps(d["zk"], sort_keys=True) for d in shown["positions"]}) > 2  # the owner table moved

    # as a reader sees it: the joiner's registration above the notifications it fires in the step log, and no
    # orange "notified" dot before the first notification (none at the change itself)
    joiner = lesson.designs["zk"].change["members"][0]
    registers = next(i for i, text in enumerate(shown["zkLog"]) if f"{joiner} registers " in text)
    notifies = [i for i, text in enumerate(shown["zkLog"]) if "ZooKeeper notifies" in text]
    assert notifies and registers < min(notifies), shown["zkLog"][:registers + 1]
    first_notified = next(p for p, dom in enumerate(shown["positions"]) if "ZooKeeper notifies" in dom["title"])
    assert [dom["zkDots"] for dom in shown["positions"][:first_notified]] == [0] * first_notified
    assert shown["positions"][first_notified]["zkDots"] == 1
    notified = {s.member for s in lesson.designs["zk"].steps if s.kind == "notify"}
    assert max(dom["zkDots"] for dom in shown["positions"]) == len(notified)  # every incumbent heard of it

    position = most_interesting(lesson)
    shot = tmp_path / "lesson.png"
    result = _run_browser([f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1500,1300",
                           f"--screenshot={shot}", f"{page.as_uri()}#step={position}"])
    assert shot.exists() and shot.stat().st_size > 10_000, result.stderr[-2000:]
    print(f"lesson page screenshot (step {position}): {shot}")


# --- the original design as a third column ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def three_designs(lesson_runs: LessonRuns) -> Lesson:
    """The lesson run with a third design: the shipped lesson scenario run on the original Kafka 0.8.2.2 consumer
    too (real JVM members), its run directory put beside the other two."""
    summaries = lesson_runs.summaries(["original"])
    assert [s.completed for s in summaries.values()] == [True]
    return build_lesson(lesson_runs.view(["zk", "original", "coordinator"]))


def wire_owners_at(records: list[dict[str, Any]], ts: float) -> dict[str, str]:
    """Owner nodes from the ZooKeeper proxy's replies, folded up to `ts`: partition -> the member whose link
    created it (no lesson code)."""
    owners: dict[str, str] = {}
    for r in records:
        if r["ts"] > ts + 1e-9:
            break
        if r["type"] != "wire" or r.get("proto") != "zk" or r["kind"] != "reply":
            continue
        found = re.search(r"/owners/([^/]+)/(\d+)$", r.get("path") or "")
        if not found:
            continue
        p = f"{found.group(1)}/{found.group(2)}"
        if r["op"] == "create" and r["err"] == 0:
            owners[p] = r["link"]
        elif r["op"] == "delete" and owners.get(p) == r["link"]:
            del owners[p]
    return owners


def test_the_original_is_replayed_from_the_wire(three_designs: Lesson) -> None:
    assert list(three_designs.designs) == ["zk", "original", "coordinator"]
    replay = three_designs.designs["original"]
    records, start, _ = _window(three_designs, "original")
    claims = [s for s in replay.steps if s.kind == "claim"]
    assert claims and all(s.member for s in claims)
    assert not [s for s in replay.steps if s.kind in ("fetch", "stop-fetchers", "commit")]  # not reported
    for step in replay.steps:
        assert {p: n["thread"] for p, n in step.state["owners"].items()} == wire_owners_at(records, start + step.t)
    # two runs, two implementations, one range assignment: in the end the same members own the same partitions
    # (the consumer ids are the scenario's, so both sort the same threads), read from the original's owner nodes
    # on the wire and from our members' own claims; each run has a topic of its own: partitions go by number
    ours = three_designs.designs["zk"].steps[-1].state["owners"]
    theirs = replay.steps[-1].state["owners"]
    assert len(theirs) == len(ours) > 0
    assert {p.rsplit("/", 1)[1]: n["thread"] for p, n in theirs.items()} == {
        p.rsplit("/", 1)[1]: n["thread"].rsplit("-", 1)[0] for p, n in ours.items()}
    manifest = json.loads((replay.run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["design"], manifest["versions"]["kafka_original"]) == ("original", "0.8.2.2")
    assert len(three_designs.timeline) == sum(len(r.steps) for r in three_designs.designs.values())


@needs_chromium
def test_the_page_shows_the_original_as_a_third_column(three_designs: Lesson, tmp_path: Path) -> None:
    page = write_lesson(three_designs, tmp_path / "three.html")
    text = page.read_text(encoding="utf-8")
    driven = tmp_path / "driven.html"
    driven.write_text(text.replace("<head>", "<head>" + ERRORS, 1).replace("</body>", DRIVER + "</body>", 1))
    result = _run_browser([f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=20000",
                           "--dump-dom", driven.as_uri()])
    found = re.search(r'<pre id="lesson-test-out">(.*?)</pre>', result.stdout, re.S)
    assert found, f"no driver output; chromium exit {result.returncode}: {result.stderr[-2000:]}"
    shown = json.loads(html.unescape(found.group(1)))
    assert shown["errors"] == [] and shown["max"] == len(three_designs.timeline)
    records, start, _ = _window(three_designs, "original")
    last = -1
    for p, dom in enumerate(shown["positions"]):
        assert dom["panes"] == 3
        if p and three_designs.timeline[p - 1]["design"] == "original":
            last = three_designs.timeline[p - 1]["index"]
        ts = start + (three_designs.designs["original"].steps[last].t if last >= 0 else 0.0)
        assert {k: v for k, v in dom["original"].items() if v != "none"} == wire_owners_at(records, ts), p
    assert len({json.dumps(d["original"], sort_keys=True) for d in shown["positions"]}) > 2
    shot = tmp_path / "three.png"
    result = _run_browser([f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1900,1300",
                           f"--screenshot={shot}", f"{page.as_uri()}#step={most_interesting(three_designs)}"])
    assert shot.exists() and shot.stat().st_size > 10_000, result.stderr[-2000:]
    print(f"three-design lesson page screenshot: {shot}")
