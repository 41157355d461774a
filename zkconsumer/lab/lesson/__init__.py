"""`zkconsumer lab lesson`: one membership change of a lab run, replayed step by step on each design it ran, in
generation order (ours and the original 0.8.2.2 on ZooKeeper, eager, cooperative-sticky, the consumer protocol),
in a self-contained HTML page (docs/lesson.md)."""

from zkconsumer.lab.lesson.model import CodeRef, DesignReplay, Lesson, LessonError, Step, find_runs
from zkconsumer.lab.lesson.page import most_interesting, render, write_lesson
from zkconsumer.lab.lesson.steps import build_design, build_lesson

__all__ = ["CodeRef", "DesignReplay", "Lesson", "LessonError", "Step", "build_design", "build_lesson", "find_runs",
           "most_interesting", "render", "write_lesson"]
