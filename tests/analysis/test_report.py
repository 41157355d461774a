"""The HTML report: self-contained (no network), and its charts really render in a headless browser."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from zkconsumer.lab.analysis.job import AnalysisResult

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="missing tool: chromium (Debian: apt-get install chromium), so the report's "
                             "rendering cannot be checked in a browser")


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    assert CHROMIUM is not None
    # --no-sandbox: the tests run as root, where chromium refuses its sandbox; virtual time lets the page's
    # scripts finish before the DOM is dumped or the picture taken, without a wall-clock wait.
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def png_pixels(path: Path) -> bytes:
    """The decompressed scanlines of a PNG (filter bytes included): enough to tell a blank picture."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return zlib.decompress(idat)


@pytest.mark.slow
def test_the_report_needs_no_network(analysed: AnalysisResult) -> None:
    html = analysed.report.read_text(encoding="utf-8")
    assert re.search(r"<script[^>]*\ssrc=", html) is None  # plotly.js is inline, not fetched
    assert re.search(r"<link[^>]*\shref=", html) is None
    assert "Plotly.newPlot" in html
    assert "Servers: ZooKeeper 3.9.5, Apache Kafka 3.9.2 (as each run recorded them)." in html


@pytest.mark.slow
@needs_chromium
def test_the_charts_render_in_headless_chromium(analysed: AnalysisResult, tmp_path: Path) -> None:
    html = analysed.report.read_text(encoding="utf-8")
    figures = int(re.search(r"data-figures='(\d+)'", html).group(1))
    assert figures == 6  # two herd curves, the latency boxes, one timeline per design, the predictions
    uri = analysed.report.resolve().as_uri()
    dom = chromium(tmp_path, "--dump-dom", uri)
    assert dom.returncode == 0, dom.stderr[-2000:]
    # plotly draws each figure into <svg class="main-svg"> elements: present only if its script ran
    rendered = len(re.findall(r'<div[^>]*class="[^"]*js-plotly-plot', dom.stdout))
    assert rendered == figures, f"{rendered} of {figures} figures rendered"
    assert dom.stdout.count('class="main-svg"') >= figures
    for title in ("requests per membership change vs N", "latency distributions", "ownership around one change"):
        assert title in dom.stdout
    shot = tmp_path / "report.png"
    taken = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2400", uri)
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    pixels = png_pixels(shot)
    # a blank page is one colour (a handful of distinct bytes with the filter bytes); charts have many
    assert len(set(pixels)) > 50


# --- the verdict: computed from the rows, so rows where the other design wins give the other verdict -----------

def herd_rows(zk_requests: dict[int, float], coord_requests: dict[int, float], **extra: dict[str, dict[int, float]]
              ) -> list[dict]:
    """One completed herd run per design and N, with the given per-change request counts (and any other column
    as {design: {N: value}})."""
    rows = []
    for design, requests in (("zk", zk_requests), ("coordinator", coord_requests)):
        column = "zk_requests_per_change" if design == "zk" else "kafka_coordination_per_change"
        for n, value in requests.items():
            row = {"scenario": "herd", "design": design, "members": n, "completed": True, "changes": 1,
                   column: value}
            for name, per_design in extra.items():
                if n in per_design.get(design, {}):
                    row[name] = per_design[design][n]
            rows.append(row)
    return rows


def finding(findings: list, metric: str):
    return next(f for f in findings if f.metric == metric)


def test_the_verdict_names_the_winner_from_the_n_where_it_starts_winning() -> None:
    from zkconsumer.lab.analysis.verdict import verdict

    # a quadratic cost outgrows a linear one between N = 8 and N = 16
    zk = {n: n * n for n in (1, 2, 4, 8, 16, 32)}
    coord = {n: 12 * n for n in (1, 2, 4, 8, 16, 32)}
    found = verdict(herd_rows(zk, coord))
    requests = finding(found, "requests")
    assert (requests.winner, requests.from_n, requests.clear) == ("coordinator", 16, True)
    assert requests.ratio == pytest.approx(zk[32] / coord[32])
    assert "GroupCoordinator) lower from N = 16 on" in requests.text
    assert "at N = 32: 384 against 1,024 (ZooKeeper (zkconsumer)), 2.7x lower" in requests.text
    assert "Below that ZooKeeper (zkconsumer) was lower at N = 1, 2, 4, 8 (at N = 8: 64 against 96)" in requests.text
    assert "no delivery audit" in finding(found, "duplicates").text
    assert "one run per design and N, so a small difference may be run-to-run noise" in found[0].text
    assert "cannot be split into noticing and rebalancing" in finding(found, "noticing").text

    # the same code on the mirrored rows gives the mirrored verdict, and on rows where one design is cheaper
    # everywhere says so
    flipped = finding(verdict(herd_rows(coord, zk)), "requests")
    assert (flipped.winner, flipped.from_n) == ("zk", 16)
    assert "ZooKeeper (zkconsumer) lower from N = 16 on" in flipped.text
    assert ("Below that Classic eager (GroupCoordinator) was lower at N = 1, 2, 4, 8 (at N = 8: 64 against 96)"
            in flipped.text)
    everywhere = finding(verdict(herd_rows(coord, {n: 13 * n for n in coord})), "requests")
    assert (everywhere.winner, everywhere.from_n) == ("zk", 1)
    assert "ZooKeeper (zkconsumer) lower at every N measured (N = 1 to 32)" in everywhere.text
    assert "Below that" not in everywhere.text


def test_the_verdict_splits_time_to_stable_and_says_when_repeats_overlap() -> None:
    from zkconsumer.lab.analysis.verdict import verdict

    sizes = (4, 64)
    rows = herd_rows({n: 1.0 for n in sizes}, {n: 1.0 for n in sizes},
                     time_to_stable_s={"zk": {4: 0.3, 64: 4.7}, "coordinator": {4: 1.1, 64: 1.2}},
                     noticing_s={"zk": {4: 0.05, 64: 0.1}, "coordinator": {4: 0.9, 64: 1.0}},
                     rebalancing_s={"zk": {4: 0.25, 64: 4.6}, "coordinator": {4: 0.2, 64: 0.2}},
                     duplicates={"zk": {4: 0, 64: 0}, "coordinator": {4: 0, 64: 0}})
    # a second repeat of the coordinator at N = 64 that was slower than the ZooKeeper design's one
    rows.append({"scenario": "herd", "design": "coordinator", "members": 64, "completed": True, "changes": 1,
                 "kafka_coordination_per_change": 1.0, "time_to_stable_s": 6.0, "noticing_s": 1.0,
                 "rebalancing_s": 5.0, "duplicates": 0})
    # a run of another process mode is another comparison (one design only here: none), never mixed in
    rows.append({"scenario": "herd", "design": "zk", "members": 64, "completed": True, "changes": 1,
                 "process_mode": "processes", "time_to_stable_s": 0.001})
    # a run that did not complete, or whose counts have a gap, is left out, whatever it measured
    rows.append({"scenario": "herd", "design": "zk", "members": 64, "completed": False, "changes": 1,
                 "time_to_stable_s": 0.01})
    rows.append({"scenario": "herd", "design": "zk", "members": 64, "completed": True, "changes": 1,
                 "time_to_stable_s": 0.01, "counting_gaps": "1 undecodable stream"})
    found = verdict(rows)
    assert "(2 not completed or not counted in full, left out)" in found[0].text
    assert "may be run-to-run noise" not in found[0].text
    assert not [f for f in found if "processes" in f.scenario]
    stable = finding(found, "stable")
    # medians at 64: zk 4.7, coordinator (1.2, 6.0) -> 3.6; the coordinator wins but its repeats straddle zk's
    assert (stable.winner, stable.from_n, stable.clear) == ("coordinator", 64, False)
    assert "the repeats overlap there" in stable.text
    assert "Below that ZooKeeper (zkconsumer) was lower at N = 4 (at N = 4: 0.30 s against 1.10 s)" in stable.text
    noticing, rebalancing = finding(found, "noticing"), finding(found, "rebalancing")
    assert (noticing.winner, noticing.from_n) == ("zk", 4)
    assert (rebalancing.winner, rebalancing.from_n) == ("coordinator", 4)
    assert "no design lower at N = 64" in finding(found, "requests").text  # equal counts: a tie, no winner
    assert "no design lower at N = 64" in finding(found, "duplicates").text


# --- split brain: what was measured, when it happened ----------------------------------------------------------

def split_rows() -> tuple[list[dict], list[dict], list[dict]]:
    """A ZooKeeper-design run where m3 joins (change 1): m0 still claims t/2 from its old view while m3 claims it
    from the new one in an overlapping attempt (NodeExists for m0, a backoff), then m1's session expires and t/1
    is handed over from m1 to m3 in attempts one after the other; and a coordinator run where m1 heartbeats
    with its old generation."""
    runs = [{"run_id": "z", "scenario": "s", "case": "c", "design": "zk", "members": 3, "attempts": 5,
             "failed_attempts": 1, "owner_conflicts": 1, "rebalance_failures": 0, "session_expiries": 1,
             "overlaps": 1, "overlap_s": 0.5},
            {"run_id": "k", "scenario": "s", "case": "c", "design": "coordinator", "members": 3, "overlaps": 0}]
    changes = [{"run_id": run, "change_index": 1, "action": "join", "change_members": "m3", "change_ts": 10.0,
                "window_start": 10.0, "window_end": 20.0} for run in ("z", "k")]
    events = [
        {"run_id": "z", "member": "m3", "ts": 10.1, "what": "attempt begin", "tp": None},
        {"run_id": "z", "member": "m0", "ts": 10.15, "what": "attempt begin", "tp": None},
        {"run_id": "z", "member": "m3", "ts": 10.2, "what": "owner create", "tp": "t/2"},
        {"run_id": "z", "member": "m3", "ts": 10.25, "what": "attempt end", "tp": None},
        {"run_id": "z", "member": "m0", "ts": 10.3, "what": "owner NodeExists", "tp": "t/2"},
        {"run_id": "z", "member": "m0", "ts": 10.31, "what": "backoff after conflict", "tp": None},
        {"run_id": "z", "member": "m0", "ts": 10.8, "what": "attempt begin", "tp": None},
        {"run_id": "z", "member": "m0", "ts": 10.9, "what": "owner create", "tp": "t/0"},
        {"run_id": "z", "member": "m0", "ts": 10.95, "what": "attempt end", "tp": None},
        {"run_id": "z", "member": "m1", "ts": 11.0, "what": "attempt begin", "tp": None},
        {"run_id": "z", "member": "m1", "ts": 11.05, "what": "owner create", "tp": "t/1"},
        {"run_id": "z", "member": "m1", "ts": 11.1, "what": "attempt end", "tp": None},
        {"run_id": "z", "member": "m3", "ts": 11.5, "what": "attempt begin", "tp": None},
        {"run_id": "z", "member": "m3", "ts": 11.55, "what": "owner create", "tp": "t/1"},
        {"run_id": "z", "member": "m3", "ts": 11.6, "what": "attempt end", "tp": None},
        {"run_id": "z", "member": "m1", "ts": 12.5, "what": "session expired", "tp": None},
        {"run_id": "z", "member": "m2", "ts": 9.0, "what": "owner create", "tp": "t/0"},  # before the change
        {"run_id": "k", "member": "m1", "ts": 11.0, "what": "Heartbeat ILLEGAL_GENERATION", "tp": None},
    ]
    return runs, changes, events


def test_split_brain_counts_disagreeing_views_and_lists_each_event_when_it_happened() -> None:
    from zkconsumer.lab.analysis.split_brain import per_run, section

    runs, changes, events = split_rows()
    zk, coordinator = per_run(runs, changes, events, {"z": 1})
    assert zk.contested == [(1, "t/2", ["m0", "m3"])] and zk.disagreeing == ["m0", "m3"]
    assert [e[2:4] for e in zk.events] == [("m0", "owner NodeExists"), ("m0", "backoff after conflict"),
                                           ("m1", "session expired")]
    assert zk.events[0][1] == pytest.approx(0.3)
    assert coordinator.disagreeing == ["m1"] and not coordinator.contested
    # a claim refused while the owner had not released yet: the claimant's view was not the owner's
    late = per_run(runs, changes, [e for e in events if e["what"] == "owner NodeExists"])[0]
    assert late.disagreeing == ["m0"] and not late.contested

    page = section(runs, changes, events, [], {"z": 1})
    assert "the znode is the lock" in page and "NodeExists" in page
    assert "Claimed by two members in overlapping attempts: t/2 by m0, m3 (change 1)." in page
    assert "<td>1: join m3</td><td>+0.300</td><td>m0</td><td>owner NodeExists</td><td>t/2</td>" in page
    assert "No fetch overlap" in page

    # nothing happened: the section says so instead of showing empty tables
    calm = section(runs, changes, [e for e in events if e["what"] == "owner create" and e["member"] != "m0"], [])
    assert "No owner conflict, failed attempt, expiry, stale generation or contested claim" in calm


def test_a_timeline_runs_through_the_recovery_of_its_whole_churn_step() -> None:
    from zkconsumer.lab.analysis.windows import RECOVERY_MARGIN_S, recovery_span

    # three expiries at once (one churn step, three change windows of 25 ms), stable 4 s after the last
    storm = [{"change_index": i, "step": 0, "change_ts": 10.0 + 0.025 * (i - 1), "window_start": 10.0 + 0.025 * (i - 1),
              "window_end": 10.0 + 0.025 * i if i < 3 else 30.0, "stable_ts": None, "convergence_s": None}
             for i in (1, 2, 3)]
    storm[2].update(stable_ts=14.05, convergence_s=3.5)
    start, end = recovery_span(storm, storm[0])
    assert (start, end) == (10.0, pytest.approx(14.05 + RECOVERY_MARGIN_S))
    storm[2]["convergence_s"] = 5.0  # the last ownership event after the stable record: the later one counts
    assert recovery_span(storm, storm[0])[1] == pytest.approx(10.05 + 5.0 + RECOVERY_MARGIN_S)
    storm[2].update(stable_ts=None, convergence_s=None)  # never recovered: to the end of the step's last window
    assert recovery_span(storm, storm[0]) == (10.0, 30.0)


@pytest.mark.slow
@needs_chromium
def test_the_report_opens_with_the_verdict_and_shows_split_brain_events(analysed: AnalysisResult,
                                                                         tmp_path: Path) -> None:
    """As a reader sees the page: the first section is the verdict, computed from the hand-built herd sweep
    (3·N² ZooKeeper requests against 5·N coordination requests per join, analysis_builders.sweep), and the
    split-brain section lists the split run's expiry, backoffs and give-up with their times."""
    dom = chromium(tmp_path, "--dump-dom", analysed.report.resolve().as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom.stdout)).replace("&amp;", "&")
    headings = re.findall(r"<h2[^>]*>(.*?)</h2>", dom.stdout)
    assert headings[0] == "Verdict"
    verdict = re.search(r"<section id=\"verdict\">(.*?)</section>", dom.stdout, re.S).group(1)
    items = [re.sub(r"<[^>]+>", "", li) for li in re.findall(r"<li[^>]*>(.*?)</li>", verdict, re.S)]
    requests = next(i for i in items if i.startswith("Requests per membership change"))
    assert "GroupCoordinator) lower from N = 2 on (of N = 1 to 8)" in requests
    assert "at N = 8: 40 against 192 (ZooKeeper (zkconsumer)), 4.8x lower" in requests
    assert "Below that ZooKeeper (zkconsumer) was lower at N = 1 (at N = 1: 3 against 5)" in requests
    assert any(i.startswith("Notifications per membership change") and "no design lower at N = 8" in i
               for i in items)
    split = text[text.index("Split brain: members that disagree"):text.index("Trace lines that could not be used")]
    assert "the znode is the lock" in split
    for shown in ("+0.150 m1 backoff after conflict", "+0.300 m0 session expired", "+2.050 m0 backoff after error",
                  "+2.100 m0 rebalance failed"):
        assert shown in split, shown
    assert re.search(r"t/0 m0 m2 1: join m2 \+0\.500 1\.500 yes", split)  # the fetch overlap after m0's expiry
