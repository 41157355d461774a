"""The full-screen view: members, partitions and a scrolling log of what changed, redrawn from a `GroupWatcher`.

The app only reads the watcher (a timer polls its version and notifications); every ZooKeeper call happens on
the watcher's threads, so the UI never blocks on ZooKeeper.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, RichLog, Static

from fetcher_manager.topic_partition import TopicPartition
from zkconsumer.watch import model
from zkconsumer.watch.live import GroupWatcher, Notification

REFRESH_S = 0.2
HIGHLIGHT_S = 3.0
# How a row that just changed is shown, by the kind of change (live.Notification.kind).
ROW_STYLES = {
    "claim": "bold black on green", "joined": "bold black on green", "moved": "bold black on yellow",
    "rollback": "bold white on red", "release": "black on grey62", "commit": "bold", "topic": "bold",
}
LOG_STYLES = {
    "claim": "green", "joined": "green", "moved": "yellow", "rollback": "bold red", "release": "grey62",
    "left": "magenta", "connection": "bold red", "commit": "", "topic": "cyan", "info": "bold",
}
STATE_STYLES = {model.OWNING: "green", model.REBALANCING: "yellow", model.REGISTERING: "cyan",
                model.IDLE: "", model.FAILED: "bold red"}


class WatchApp(App[None]):
    """`zkconsumer watch`: q quits."""

    TITLE = "zkconsumer watch"
    CSS = """
    #header { height: 2; padding: 0 1; background: $boost; }
    #members { height: auto; max-height: 45%; }
    #partitions { height: 1fr; }
    #log { height: 12; border-top: solid $accent; }
    """
    BINDINGS = [Binding("q", "quit", "quit"), Binding("c", "clear_log", "clear log")]

    def __init__(self, watcher: GroupWatcher, zookeeper: str) -> None:
        super().__init__()
        self.watcher = watcher
        self.zookeeper = zookeeper
        self._shown_version = -1
        self._had_highlights = False

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        yield DataTable(id="members", cursor_type="none", zebra_stripes=False)
        yield DataTable(id="partitions", cursor_type="none", zebra_stripes=False)
        yield RichLog(id="log", max_lines=2000, wrap=False, markup=False, highlight=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#members", DataTable).add_columns("MEMBER", "STATE", "SUBSCRIPTION", "OWNS")
        self.query_one("#partitions", DataTable).add_columns("TOPIC", "PARTITION", "OWNER", "OFFSET", "LOG-END",
                                                             "LAG")
        self.refresh_view()
        self.set_interval(REFRESH_S, self.refresh_view)

    def action_clear_log(self) -> None:
        self.query_one("#log", RichLog).clear()

    def refresh_view(self) -> None:
        log_pane = self.query_one("#log", RichLog)
        for note in self.watcher.take_notifications():
            log_pane.write(self._log_line(note))
        recent = self.watcher.recent_changes(HIGHLIGHT_S)
        version = self.watcher.version
        # Redraw on a change, and while highlights are on screen (so they fade out on time).
        if version == self._shown_version and not recent and not self._had_highlights:
            return
        self._shown_version = version
        self._had_highlights = bool(recent)
        view = self.watcher.view()
        self._draw_header(view)
        self._draw_members(view, recent)
        self._draw_partitions(view, recent)

    @staticmethod
    def _log_line(note: Notification) -> Text:
        stamp = time.strftime("%H:%M:%S", time.localtime(note.at)) + f".{int(note.at * 1000) % 1000:03d}"
        return Text.assemble((stamp + " ", "dim"), (note.text, LOG_STYLES.get(note.kind, "")))

    def _draw_header(self, view: model.GroupView) -> None:
        lag_total = sum(p.lag or 0 for p in view.partitions)
        session = self.watcher.zk.session_id
        line1 = (f"group {view.group}   zookeeper {self.zookeeper}   session "
                 f"{f'0x{session:x}' if session else '-'}   (read-only: no writes, one watch per node)")
        line2 = (f"members {len(view.members)}   partitions {len(view.partitions)}   owned {view.owned_count}   "
                 f"lag {lag_total if view.brokers_reachable else '- (no broker reachable)'}")
        self.query_one("#header", Static).update(Text(f"{line1}\n{line2}"))

    def _draw_members(self, view: model.GroupView, recent: dict[TopicPartition | str, str]) -> None:
        table = self.query_one("#members", DataTable)
        table.clear()
        for member in view.members:
            style = ROW_STYLES.get(recent.get(member.consumer_id, ""), "")
            cells = [Text(member.consumer_id, style=style),
                     Text(member.state_label, style=style or STATE_STYLES[member.state]),
                     Text(member.subscription, style=style), Text(model.owned_text(member.owned), style=style)]
            table.add_row(*cells)
        if not view.members:
            table.add_row(Text("(no members registered)", style="dim"), "", "", "")

    def _draw_partitions(self, view: model.GroupView, recent: dict[TopicPartition | str, str]) -> None:
        table = self.query_one("#partitions", DataTable)
        table.clear()
        for row in view.partitions:
            style = ROW_STYLES.get(recent.get(row.key, ""), "")
            owner_style = style or ("" if row.owner_registered else "red")
            table.add_row(Text(row.topic, style=style), Text(str(row.partition), style=style),
                          Text(model.owner_text(row), style=owner_style), Text(model.offset_text(row), style=style),
                          Text(model.dash(row.log_end), style=style), Text(model.dash(row.lag), style=style))
