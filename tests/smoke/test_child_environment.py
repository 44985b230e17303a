"""msnb's mindformers children write where msnb reads, whatever the user's shell holds.

mindformers sends its logs to ``LOG_MF_PATH`` and its checkpoints to ``LOCAL_DEFAULT_PATH`` and uploads to
``REMOTE_SAVE_URL``; a shell that sourced a real job's settings holds the job's values. Before the children got
their own, a smoke run there wrote into the job's folders and failed its own verdict ("MFLossMonitor wrote no loss
line"); the smoke's end-to-end case is ``test_legacy_llama_from_the_cli``.
"""

from __future__ import annotations

import os

from msnb.fullsize.preflight import run_preflight
from msnb.processes import LAUNCH_VARIABLES, child_environment
from tests.smoke.test_preflight import MOE, needs_mindformers

THE_JOBS = {"RANK_SIZE": "8", "RANK_ID": "3", "MS_SIMULATION_LEVEL": "1", "MS_ROLE": "MS_WORKER", "REMOTE_SAVE_URL": "obs://bucket/job"}


def test_a_child_gets_the_users_environment_with_mindformers_outputs_in_its_folder_and_no_launch(tmp_path, monkeypatch):
    for name, value in {**THE_JOBS, "LOG_MF_PATH": "/job/log", "LOCAL_DEFAULT_PATH": "/job/output", "MSNB_KEPT": "yes"}.items():
        monkeypatch.setenv(name, value)
    env = child_environment(tmp_path, TMPDIR="/scratch")
    assert env["LOCAL_DEFAULT_PATH"] == str(tmp_path / "output") and env["LOG_MF_PATH"] == str(tmp_path / "output" / "log")
    assert env["TMPDIR"] == "/scratch" and env["MSNB_KEPT"] == "yes" and env["PATH"] == os.environ["PATH"]
    assert not set(env) & (set(THE_JOBS) | set(LAUNCH_VARIABLES))
    assert os.environ["RANK_ID"] == "3"  # the caller's own environment is left as it was


@needs_mindformers
def test_the_pre_flight_writes_nothing_into_the_jobs_folders_and_reads_no_launch_from_the_shell(tmp_path, monkeypatch):
    job = tmp_path / "the_job"
    clean = run_preflight(MOE, devices=16, memory=False)
    for name, value in {**THE_JOBS, "LOG_MF_PATH": str(job / "log"), "LOCAL_DEFAULT_PATH": str(job / "output")}.items():
        monkeypatch.setenv(name, value)
    beside_a_job = run_preflight(MOE, devices=16, memory=False)
    assert not job.exists()
    assert [(c.check, c.outcome) for c in beside_a_job.checks] == [(c.check, c.outcome) for c in clean.checks]
    assert beside_a_job.outcome == clean.outcome, beside_a_job.format_text()
