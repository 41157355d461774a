"""`zkconsumer lab run`: servers up once, every selected case on every selected design, a progress bar, the
summary table, and everything stopped at the end, on failure, and on Ctrl-C (the interrupted run's
directory is marked incomplete in its manifest).

The broker is started with the first case's broker settings (`servers.broker_settings`: the coordinator's
`group.initial.rebalance.delay.ms`) and restarted before a run whose case needs other values; so is the KRaft
broker of the newer protocols (`servers.kraft_settings`), started only when a selected design runs there. Cases come
sweep value by sweep value, so a sweep over that setting restarts it once per value, not once per run.

A caller that owns running `LabServers` (the test suite's one embedded set) passes them as `servers`: the session
then starts and stops none, and only reconfigures their brokers as above. Runs stay apart on shared servers as on
the session's own (case_run.py: a group and topics of their own per run; proxies route each record to its run).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from pathlib import Path

from zkconsumer.errors import InputError
from zkconsumer.lab.designs import FAITHFUL, KRAFT_DESIGNS, MODE_DESIGN, broker_kind, design_label
from zkconsumer.lab.rules.shipped import GroupSettings, case_for
from zkconsumer.lab.runs.case_run import CaseRun
from zkconsumer.lab.runs.servers import LabServers, broker_settings, kraft_settings
from zkconsumer.lab.runs.summary import RunSummary, summarize
from zkconsumer.lab.scenarios.loading import Case, Scenario, expand_cases
from zkconsumer.lab.scenarios.model import Sweep

log = logging.getLogger(__name__)


def select_cases(scenario: Scenario, values: str | None, repeats: int | None) -> list[Case]:
    """The scenario's cases, with its sweep narrowed or extended to `values` (e.g. "128,256" on the herd's
    members axis) and only the first `repeats` repeats. Every case is validated like the file's own."""
    if values:
        if scenario.sweep is None:
            raise InputError(f"--values: scenario {scenario.name} has no sweep; run it without --values")
        try:
            wanted = [int(v) for v in values.split(",") if v.strip()]
        except ValueError:
            raise InputError(f"--values {values!r}: give sweep values as integers, e.g. 1,2,4") from None
        sweep = Sweep(axis=scenario.sweep.axis, values=list(dict.fromkeys(wanted)))
        scenario = scenario.model_copy(update={"sweep": sweep})
    cases = expand_cases(scenario)
    if repeats is not None:
        cases = [c for c in cases if c.repeat < repeats]
    return cases


def refuse_unfit_servers(scenario: Scenario, designs: list[str], servers: LabServers, zookeeper: str | None,
                         bootstrap: str | None, kafka_proxy_port: int) -> None:
    """Given servers are used as they are: refuse what they cannot be for this scenario and these designs."""
    if zookeeper is not None or bootstrap is not None or kafka_proxy_port:
        raise InputError("LabSession: give either running servers (servers=) or the servers to start "
                         "(zookeeper=, bootstrap=, kafka_proxy_port=), not both: the given servers' ZooKeeper, broker "
                         "and Kafka proxy are already chosen")
    if servers.ensemble is not None and len(servers.ensemble.nodes) != scenario.zk_servers:
        raise InputError(f"scenario {scenario.name} runs on {scenario.zk_servers} embedded ZooKeeper server(s) "
                         f"(zk_servers), the given servers have {len(servers.ensemble.nodes)}: give servers started "
                         f"with zk_servers={scenario.zk_servers}, or none (the session then starts its own)")
    kraft = [d for d in designs if d in KRAFT_DESIGNS]
    if kraft and servers.kafka is None:
        raise InputError(f"--design {','.join(kraft)} runs on the embedded Apache Kafka 4 broker in KRaft mode, which "
                         "servers with an external broker do not start: give embedded servers, or none (the session "
                         "then starts its own), or choose among zk, original, coordinator")


class LabSession:
    def __init__(self, scenario: Scenario, cases: list[Case], designs: list[str], out_dir: Path, *,
                 process_mode: str | None = None, zookeeper: str | None = None, bootstrap: str | None = None,
                 kafka_proxy_port: int = 0, modes: list[str] | None = None,
                 group_settings: GroupSettings = "same", servers: LabServers | None = None) -> None:
        self.scenario = scenario
        self.cases = cases
        self.designs = designs
        self.modes = modes or [FAITHFUL]
        if self.modes != [FAITHFUL] and MODE_DESIGN not in designs:
            raise InputError(f"--mode {','.join(self.modes)}: only the {MODE_DESIGN} design runs the opt-in modes "
                             f"(Kafka 0.8.2.2's own consumer and the coordinator's have no such settings); add "
                             f"{MODE_DESIGN} to --design, or run the faithful mode")
        if servers is not None:
            refuse_unfit_servers(scenario, designs, servers, zookeeper, bootstrap, kafka_proxy_port)
        kraft = [d for d in designs if d in KRAFT_DESIGNS]
        if kraft and (zookeeper is not None or bootstrap is not None):
            raise InputError(f"--design {','.join(kraft)} runs on the embedded Apache Kafka 4 broker in KRaft mode, "
                             "which the lab does not start beside external servers: drop --zookeeper/--bootstrap, "
                             "or choose among zk, original, coordinator")
        self.servers = servers
        self.group_settings = group_settings
        self.out_dir = out_dir
        self.process_mode = process_mode
        self.zookeeper = zookeeper
        self.bootstrap = bootstrap
        self.kafka_proxy_port = kafka_proxy_port

    def run(self, progress=None) -> list[RunSummary]:
        """Every case on every design, in order; returns their summaries. Servers live for the session (given
        ones, for their owner's)."""
        self.refuse_taken_out()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.servers is not None:  # the owner's: it stops them
            return self._run_on(self.servers, progress)
        # Server data under the results directory: whatever the run starts is findable by that path.
        with tempfile.TemporaryDirectory(prefix=".servers-", dir=self.out_dir) as tmp:
            servers = LabServers.start(Path(tmp), self.scenario.zk_servers, self.zookeeper, self.bootstrap,
                                       self.kafka_proxy_port,
                                       broker_settings(self.cases[0].scenario) if self.cases else None)
            try:
                return self._run_on(servers, progress)
            finally:
                servers.stop()

    def _run_on(self, servers: LabServers, progress: Callable[[str | None], None] | None) -> list[RunSummary]:
        summaries = []
        for case in self.cases:
            servers.configure_broker(broker_settings(case.scenario))
            if any(d in KRAFT_DESIGNS for d in self.designs):
                servers.configure_kraft(kraft_settings(case.scenario))
            for design, mode in self.runs_of_case():
                label = design_label(design, mode)
                run_case = case_for(case, design, self.group_settings)
                if run_case is not case:  # the design's own defaults: its broker's settings change too
                    if broker_kind(design) == "kraft":
                        servers.configure_kraft(kraft_settings(run_case.scenario))
                    else:
                        servers.configure_broker(broker_settings(run_case.scenario))

                def report(text: str, case=case, label=label) -> None:
                    if progress is not None:
                        progress(f"{case.case_id} {label}: {text}")

                path = CaseRun(run_case, design, servers, self.out_dir, process_mode=self.process_mode,
                               progress=report, mode=mode, group_settings=self.group_settings).run()
                summaries.append(summarize(path))
                if progress is not None:
                    progress(None)
        return summaries

    def runs_of_case(self) -> list[tuple[str, str]]:
        """(design, mode) of each run a case makes: the zk design once per mode, every other design once."""
        return [(design, mode) for design in self.designs
                for mode in (self.modes if design == MODE_DESIGN else [FAITHFUL])]

    def refuse_taken_out(self) -> None:
        """Before any server starts: a results directory is never overwritten or mixed with an earlier run's."""
        taken = [self.out_dir / c.case_id / design_label(d, m) for c in self.cases for d, m in self.runs_of_case()
                 if (self.out_dir / c.case_id / design_label(d, m)).exists()]
        if taken:
            raise InputError(f"--out {self.out_dir} already holds results ({taken[0].relative_to(self.out_dir)}): "
                             "give another --out, or remove the directory")
