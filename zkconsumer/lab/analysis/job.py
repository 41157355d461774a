"""The analysis job: lab run directories in, Parquet tables and one HTML report out.

    spark-submit zkconsumer/lab/analysis/job.py RUN_DIR... --out REPORT_DIR
    python -m zkconsumer.lab.analysis.job RUN_DIR... --out REPORT_DIR

Run as a file (spark-submit), this module is `__main__` with its own directory first on sys.path; it replaces
that entry with the repository root before importing anything of the project, so `zkconsumer` resolves and no
module of this package can shadow a library's.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # before any project import: see the module docstring
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parents[2]))

import argparse
import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

import zkconsumer.lab.analysis.predictions as sim
from zkconsumer.errors import InputError
from zkconsumer.lab.analysis.calibration import predict_held_out
from zkconsumer.lab.analysis.chaos_tables import analyze_campaigns, is_campaign
from zkconsumer.lab.analysis.held import Held, held_frame, hold, planned_whole
from zkconsumer.lab.analysis.local_spark import LOCAL_MASTER, configure_driver, driver_java_options
from zkconsumer.lab.analysis.metrics import compute
from zkconsumer.lab.analysis.migrate_report import MigrateSection
from zkconsumer.lab.analysis.modes_tables import modes_frame, modes_order, modes_table, run_mode
from zkconsumer.lab.analysis.owner_nodes import OWNERS_FROM_WIRE
from zkconsumer.lab.analysis.readers import RunInfo, Traces, load_runs, read_traces, version_notes
from zkconsumer.lab.analysis.report import ReportData, Timeline, render
from zkconsumer.lab.analysis.windows import RECOVERY_MARGIN_S, recovery_span
from zkconsumer.lab.designs import DESIGNS, FAITHFUL

log = logging.getLogger(__name__)

TIMELINE_N = 4  # the timeline shows a run of about this many members: enough to see the hand-over, still readable
TOP_OVERLAPS = 50
DRIVER_MEMORY = "2g"


@dataclass
class AnalysisResult:
    out_dir: Path
    report: Path
    tables: dict[str, Path]  # name -> Parquet directory
    runs: int
    trace_lines: int
    bad_lines: int
    seconds: float
    notes: list[str] = field(default_factory=list)

    def read(self, spark: SparkSession, name: str) -> DataFrame:
        return spark.read.parquet(str(self.tables[name]))


def session(app: str = "zkconsumer-lab-analysis", driver_memory: str = DRIVER_MEMORY, *,
            master: str | None = None, java_options: str | None = None) -> SparkSession:
    """The active session, or a new one on `master` (a cluster's URL such as spark://host:7077; default
    local[2]). Under spark-submit (it starts the driver with PYSPARK_GATEWAY_PORT set) its --master and memory
    are kept, and `master` is an error: spark-submit's must win.

    `java_options` are the driver JVM's options beyond its collector; None maps the class-data archive when
    `make jvm` built one (local_spark.driver_java_options)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = configure_driver(SparkSession.builder.appName(app).config("spark.ui.enabled", "false")
                               .config("spark.ui.showConsoleProgress", "false")
                               .config("spark.sql.shuffle.partitions", "2"))
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        if master is not None:
            raise ValueError(f"a master ({master}) given to a job under spark-submit: pass it as spark-submit's "
                             "--master")
    else:
        # The JVM is started here, so its heap can still be chosen: the parsed lines are cached in it, and with
        # Spark's default of 1 GiB a million of them leave the collector busy (spark-submit users pass their own).
        builder = (builder.master(master or LOCAL_MASTER).config("spark.driver.memory", driver_memory)
                   .config("spark.driver.extraJavaOptions", driver_java_options(java_options)))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def analyze(run_dirs: list[Path], out_dir: Path, spark: SparkSession | None = None, *,
            predict_to: int | None = sim.PREDICT_TO) -> AnalysisResult:
    """Read every run under `run_dirs`, write OUT/tables/<name>/ (Parquet) and OUT/report.html.

    With `predict_to` (None: no simulation), the scale simulation predicts every run of one member joining a
    settled group and the group sizes above them up to `predict_to` (predictions.py): tables `predictions` (one
    sweep row per N) and `prediction_comparison` (observed next to predicted, per run and metric).

    The trace lines are read and parsed once (readers.py) for the runs and the campaigns alike; the tables are
    computed a step at a time, each step one query (metrics.py, held.py), and the report is made from the rows
    the job holds: nothing is read back."""
    began = time.monotonic()
    runs = load_runs([Path(p) for p in run_dirs])
    if not runs:  # before a JVM is started for nothing
        raise InputError(f"no run directory (with a manifest.json) under {', '.join(map(str, run_dirs))}: give "
                         "`lab run --out` directories or run directories")
    spark = spark or session()
    with planned_whole(spark):
        return _analyze(spark, runs, out_dir, predict_to, began)


def _said(notes: list[str]) -> list[str]:
    """Traces of another schema version: said once per file and version, in the log (and the report's notes)."""
    for note in notes:
        log.warning("%s", note)
    return notes


def _analyze(spark: SparkSession, runs: list[RunInfo], out_dir: Path, predict_to: int | None,
             began: float) -> AnalysisResult:
    # fault campaigns have no case or churn: kept out of the standard tables, analysed apart (chaos_tables.py)
    campaigns = [r for r in runs if is_campaign(r.scenario)]
    runs = [r for r in runs if not is_campaign(r.scenario)]
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}

    def write(tables: dict[str, Held]) -> None:
        for name, table in tables.items():
            paths[name] = table.write(out_dir / "tables" / name)

    chaos = None
    versions: list[str] = []
    if campaigns:
        traces = read_traces(spark, campaigns)
        versions = _said(version_notes(campaigns, [(e[0], e[1], e[5]) for e in traces.error_rows if e[3]]))
        chaos_held, chaos = analyze_campaigns(spark, traces.records, campaigns, traces.bad_lines)
        _release(traces)
        write(chaos_held)
    if not runs:
        data = ReportData(chaos=chaos, notes=versions)
        return AnalysisResult(out_dir, render(data, out_dir / "report.html"), paths, len(campaigns), 0, 0,
                              time.monotonic() - began)
    log.info("analysing %d runs", len(runs))
    tables = compute(spark, runs)
    errors = tables["trace_errors"].rows()
    lines, bad_lines = sum(e["lines"] for e in errors), sum(e["bad_lines"] for e in errors)
    versions += _said(version_notes(runs, [(e["run_id"], e["file"], e["first_bad_reason"]) for e in errors
                                           if e["bad_lines"]]))
    modes = {r.run_id: run_mode(r) for r in runs}
    modal = any(mode != FAITHFUL for mode in modes.values())
    if modal:  # a run of an opt-in mode: the modes compared (modes_tables.py)
        tables["modes"] = hold(spark, {"modes": modes_table(tables["runs"].frame(spark),
                                                             modes_frame(spark, runs))})["modes"]
    write(tables)
    # The other sections compare designs, and a mode's run is the zk design: they show the faithful runs only
    data = _report_data(tables, {r for r, m in modes.items() if m == FAITHFUL} if modal else None)
    data.chaos = chaos
    data.notes.extend(versions)
    if modal:
        data.modes = sorted(tables["modes"].rows(), key=modes_order)
        data.notes.append(f"{len(runs) - len(data.runs)} runs in an opt-in mode are shown in the section \"Opt-in "
                          "modes\" only; every other section and the predictions show the faithful runs (the herd's "
                          "fit excepted: it is fitted over every run of a design).")
    if "migrate_steps" in tables:
        data.migrate = MigrateSection(tables["migrate_steps"].rows(), tables["migrate_totals"].rows())
    if predict_to is not None:
        _add_predictions(spark, data, out_dir, paths, predict_to)
    report = render(data, out_dir / "report.html")
    seconds = time.monotonic() - began
    log.info("analysis of %d runs (%d trace lines, %d bad) in %.1f s", len(runs), lines, bad_lines, seconds)
    return AnalysisResult(out_dir, report, paths, len(runs), lines, bad_lines, seconds, data.notes)


def _release(traces: Traces) -> None:
    if traces.cached is not None:
        traces.cached.unpersist()


def _report_data(tables: dict[str, Held], only: set[str] | None = None) -> ReportData:
    """The report's rows, from the tables the job holds; with `only` (run ids), of those runs alone wherever a
    table has runs. Per run, per change, per member stop or contention event in the churn, the TOP_OVERLAPS
    longest overlaps; never per trace line."""
    def rows(name: str) -> list[dict]:
        table = tables[name]
        found = table.rows()
        return found if only is None or "run_id" not in table.schema.fieldNames() else [
            r for r in found if r["run_id"] in only]

    runs = rows("runs")
    changes = rows("changes")
    pauses = [{"design": r["design"], "pause_s": r["pause_s"]} for r in rows("stop_the_world")
              if r["change_index"] is not None and (r["partitions_before"] or 0) > 0]
    errors = sorted((r for r in rows("trace_errors") if (r["bad_lines"] or 0) > 0), key=lambda r: (r["run_id"],
                                                                                                     r["file"]))
    counted = [r for r in rows("overlaps") if r["change_index"] is not None]
    overlaps = sorted(counted, key=lambda r: -r["overlap_s"])[:TOP_OVERLAPS]
    after_expiry = Counter(r["run_id"] for r in counted if r["after_expiry"])
    # inside the churn only (the runs' counts are), which leaves out the initial group's many claims
    churn = {r["run_id"]: (r["churn_start"], r["churn_end"]) for r in runs}
    contention = [r for r in rows("contention") if r["run_id"] in churn and None not in churn[r["run_id"]]
                  and churn[r["run_id"]][0] <= r["ts"] <= churn[r["run_id"]][1]]
    intervals = rows("ownership_intervals")
    timelines = [tl for design in DESIGNS if (tl := _timeline(intervals, runs, changes, design)) is not None]
    servers = sorted({r["servers"] for r in runs if r.get("servers")})
    notes = [f"Servers: {'; '.join(servers)} (as each run recorded them)." if servers
             else "The runs did not record their servers."]
    if any(r["design"] in OWNERS_FROM_WIRE for r in runs):
        notes.append("The original design (Kafka 0.8.2.2's own connector) has no rebalance listener: its "
                     "ownership intervals, stop-the-world pauses, unowned partition-seconds and owner conflicts come "
                     "from its owner nodes as the ZooKeeper proxy saw them created and deleted; rebalance failures "
                     "and session expiries are not reported by it (n/r). It is left out of the predictions, which "
                     "model this project's connector (docs/analysis.md).")
    bases = sorted({r["expected_basis"] for r in runs if r.get("expected_basis")})
    if bases:
        notes.append("Delivery audit against " + " and ".join(
            "the producer's records" if b == "produce" else "offsets 0..max consumed per partition (no produce "
            "records)" for b in bases) + ".")
    else:
        notes.append("No consume records in these runs: nothing to audit for duplicates or gaps.")
    return ReportData(runs=runs, changes=changes, fits=rows("herd_fit"), pauses=pauses, timelines=timelines,
                      trace_errors=errors, overlaps=overlaps, notes=notes, contention=contention,
                      overlaps_after_expiry=dict(after_expiry))


def _add_predictions(spark: SparkSession, data: ReportData, out_dir: Path, paths: dict[str, Path],
                     predict_to: int) -> None:
    runs = sim.comparable_runs(data.runs, data.changes)
    frame = sim.predict_frame(spark, runs, predict_to)
    if frame is None:
        # nothing the simulation models (the cooperative and consumer-protocol designs alone): the protocol
        # identities are checked all the same
        data.comparisons = sim.identities(runs)
    else:
        predictions = hold(spark, {"predictions": frame})["predictions"]  # once: the sweep is not cached
        paths["predictions"] = predictions.write(out_dir / "tables" / "predictions")
        data.predictions = predictions.rows()
        held_out = predict_held_out(spark, runs)  # time to stable out of sample, when a repeat can be held out
        data.comparisons = (sim.compare(runs, data.predictions, *held_out) if held_out
                            else sim.compare(runs, data.predictions))
    if data.comparisons:
        comparison = held_frame("prediction_comparison", sim.rows_as_dicts(data.comparisons),
                                sim.comparison_schema())
        paths["prediction_comparison"] = comparison.write(out_dir / "tables" / "prediction_comparison")


def _timeline(intervals: list[dict], runs: list[dict], changes: list[dict], design: str) -> Timeline | None:
    """The churn step of the first counted change of the design's run closest to TIMELINE_N members that has
    ownership records, from before it to after the group recovered (windows.recovery_span)."""
    owned = {r["run_id"] for r in intervals}
    candidates = sorted((abs((r["members"] or 0) - TIMELINE_N), r["members"] or 0, r["run_id"]) for r in runs
                        if r["design"] == design and r["run_id"] in owned)
    for _, _, run_id in candidates:
        of_run = sorted((c for c in changes if c["run_id"] == run_id), key=lambda c: c["change_index"])
        change = next((c for c in of_run if c["counted"]), None)
        if change is None:
            continue
        # the whole churn step (an expiry storm is several changes at once) through the group's recovery
        start, t1 = recovery_span(of_run, change)
        step = [c for c in of_run if c["step"] == change["step"]]
        t0, lo = change["change_ts"], start - RECOVERY_MARGIN_S  # and some steady state before the change
        last = step[-1]  # its time to stable is counted from its own record (docs/lab.md)
        stable = None if last.get("stable_s") is None else last["change_ts"] + last["stable_s"] - t0
        # one run's intervals around one churn step: a few per member and partition, what the chart draws
        shown = [r for r in intervals if r["run_id"] == run_id and r["end"] > lo and r["start"] < t1]
        run = next(r for r in runs if r["run_id"] == run_id)
        return Timeline(design, run_id, run["case"] or run_id, change["action"],
                        ", ".join(c["change_members"] for c in step if c["change_members"]),
                        stable, t1 - t0,
                        [(r["member"], r["tp"], max(r["start"], lo) - t0, min(r["end"], t1) - t0)
                         for r in shown])
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="zkconsumer lab analyze", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dirs", nargs="+", type=Path, help="run directories, or trees of them (lab run --out)")
    parser.add_argument("--out", required=True, type=Path, help="report directory (tables/ and report.html)")
    parser.add_argument("--predict-to", type=int, default=sim.PREDICT_TO, metavar="N",
                        help="simulate joins up to this group size next to the real runs (default %(default)s)")
    parser.add_argument("--no-predict", action="store_true", help="skip the scale simulation")
    parser.add_argument("--master", metavar="URL", default=None,
                        help=f"the Spark master to run on, e.g. spark://host:7077 (default {LOCAL_MASTER}); under "
                             "spark-submit give spark-submit's --master instead")
    args = parser.parse_args(argv)
    if args.predict_to < 1:
        parser.error(f"--predict-to must be a group size of at least 1, not {args.predict_to}")
    if args.master is not None and "PYSPARK_GATEWAY_PORT" in os.environ:
        parser.error("--master under spark-submit: give it to spark-submit (its --master decides)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        spark = None if args.master is None else session(master=args.master)  # else analyze starts the default
        result = analyze(args.run_dirs, args.out, spark, predict_to=None if args.no_predict else args.predict_to)
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    print(f"{result.runs} runs, {result.trace_lines} trace lines ({result.bad_lines} bad) in {result.seconds:.1f} s")
    if result.bad_lines:
        print(f"bad trace lines: see {result.tables['trace_errors']} and the report")
    print(f"tables: {result.out_dir / 'tables'}")
    print(f"report: {result.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
