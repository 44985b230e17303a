"""Rules only MindSpore's graph compiler enforces, stated here because compiling needs the cluster's devices.

A training job whose layout passes every mindformers check can still die in its first step, when MindSpore compiles
the graph for the pipeline.  These rules decide whether a job starts; each is written with the text MindSpore prints
and the library that holds that text (``tests/smoke/test_preflight.py`` reads the text out of the installed
MindSpore's library, so a MindSpore that changes it fails the test, not a user).
"""

from __future__ import annotations

from dataclasses import dataclass

FRONTEND = "MindSpore's graph compiler, frontend/parallel/pipeline_transformer (its text is in mindspore/lib/libmindspore_frontend.so)"


@dataclass(frozen=True)
class CompilerRule:
    """One rule: its name, the scheduler it belongs to, and the text MindSpore prints when the layout breaks it."""

    name: str
    scheduler: str
    text: str  # MindSpore's own words, up to the numbers it adds
    factor: int  # micro-batches needed per pipeline stage

    def broken_by(self, micro_batches: int, stages: int) -> bool:
        return stages > 1 and micro_batches < self.factor * stages

    def message(self, micro_batches: int, stages: int) -> str:
        if self.scheduler == "1f1b":
            return f"{self.text} {micro_batches} StageNum: {stages}"
        return f"{self.text} {micro_batches} (pipeline_stage {stages})"


RULES = (
    CompilerRule(
        "MindSpore's 1F1B pipeline rule (micro_batch_num >= pipeline_stage)",
        "1f1b",
        "For 1F1B Scheduler, MicroBatch num must be larger or equal than StageNum, but got MicroBatch:",
        1,
    ),
    CompilerRule(
        "MindSpore's zero_bubble_v pipeline rule (micro_batch_num >= 2 * pipeline_stage)",
        "zero_bubble_v",
        "For zero_bubble_v scheduler, micro_size must be greater than or equal to twice stage_num. Got micro_size:",
        2,
    ),
)


def scheduler_of(config) -> str:
    """The pipeline scheduler the run asks MindSpore for (``parallel.pipeline_config.pipeline_scheduler``; MindSpore's default 1F1B)."""
    pipeline = (config.get("parallel") or {}).get("pipeline_config") or {}
    scheduler = pipeline.get("pipeline_scheduler") if hasattr(pipeline, "get") else None
    return str(scheduler or "1f1b").lower()


def run(checks, config, layout: dict | None) -> None:
    """Each compiler rule for the run's scheduler, on its pipeline stages and micro-batches: passed, failed or not checked."""
    if layout is None:
        for rule in RULES:
            checks.not_checked(rule.name, "the parallel layout could not be built")
        return
    stages, micro = layout.get("pipeline_stage") or 1, layout.get("micro_batch_num") or 1
    scheduler = scheduler_of(config)
    for rule in RULES:
        if rule.scheduler != scheduler:
            continue
        if not layout.get("use_parallel") or stages <= 1:
            checks.passed(rule.name, "no pipeline: the rule does not apply")
        elif rule.broken_by(micro, stages):
            checks.failed(rule.name, rule.message(micro, stages), FRONTEND)
        else:
            checks.passed(rule.name, f"micro_batch_num {micro} at pipeline_stage {stages}")


__all__ = ["RULES", "CompilerRule", "run", "scheduler_of"]
