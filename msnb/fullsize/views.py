"""How the pre-flight and the per-card memory are shown: text for a terminal, HTML for a notebook, from the results
(:class:`~msnb.fullsize.preflight.PreflightResult`, :class:`~msnb.fullsize.memory.CardMemory`), which stay data.

Both read alike: the verdict first in msnb's status words and colours (:mod:`msnb.status`), with its counts; then each
finding once, with its YAML key and line, the mindformers line that raised it and what to change (the pre-flight's
proved suggestions; for the memory, :mod:`msnb.fullsize.advice`); then the warnings; then the details folded (every
check that ran, what stood in for the cluster, the memory table, what is not counted): in HTML a ``<details>`` block,
in the terminal only with ``--verbose`` (else one line saying what it lists).
"""

from __future__ import annotations

import base64
import html
import os
import sys

from ..status import COLORS, FAIL, MUTED, PASS, SKIP, WARN, status_word
from ..words import count

MONO = "font-family:monospace;white-space:pre;font-size:12px"
_ANSI = {PASS: "32", WARN: "33", FAIL: "31", SKIP: "90"}


def paint(text: str, status: str, stream=None) -> str:
    """*text* in *status*'s colour for a terminal that shows colour (not when NO_COLOR is set or output is not a terminal)."""
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or not getattr(stream, "isatty", lambda: False)():
        return text
    return f"\033[1;{_ANSI.get(status, '0')}m{text}\033[0m"


class ShownOnce:
    """A result a magic shows (HTML in a notebook, text beside it) and returns: as the cell's last line, or kept with
    ``r = %mfmon_...``, it is shown once in that cell, never again as its value."""

    _shown_in = None

    def show(self) -> None:
        """Display the result in this cell (its HTML, and its text for a front end without HTML)."""
        from IPython.display import display  # deferred: IPython, only in a notebook

        from ..plot.render import current_cell  # deferred: IPython

        display({"text/html": self._repr_html_(), "text/plain": self.format_text()}, raw=True)
        self._shown_in = current_cell()

    def _ipython_display_(self) -> None:
        from ..plot.render import current_cell  # deferred: IPython

        if self._shown_in is not None and self._shown_in == current_cell():
            return
        self.show()


# ---- the pre-flight -------------------------------------------------------------------------------------------------


def preflight_word(r) -> str:
    """FAILED, NOT CHECKED, PASSED or ``PASSED with 2 warnings``: a pass mindformers warned about never reads as a clean pass."""
    if r.outcome == "failed":
        return "FAILED"
    if r.outcome != "passed":
        return "NOT CHECKED"
    return "PASSED" if not r.warnings else f"PASSED with {count(len(r.warnings), 'warning')}"


def preflight_status(r) -> str:
    """The status the verdict is coloured in: fail, warn (not checked, or passed with warnings), pass."""
    if r.outcome == "failed":
        return FAIL
    return WARN if r.outcome != "passed" or r.warnings else PASS


def preflight_counts(r) -> str:
    """``2 findings, 1 warning, 15 checks passed, 1 not checked, 2 rules about the data not run``."""
    passed = [c for c in r.checks if c.outcome == "passed"]
    parts = [count(len(r.findings), "finding")] if r.findings else []
    parts += [count(len(r.warnings), "warning")] if r.warnings else []
    parts.append(f"{count(len(passed), 'check')} passed")
    parts += [f"{len(r.not_checked) + len(r.msnb_errors)} not checked"] if r.not_checked or r.msnb_errors else []
    parts += [f"{count(len(r.data_rules), 'rule')} about the data not run"] if r.data_rules else []
    return ", ".join(parts)


def _where(c) -> str:
    bits = []
    if c.key:
        bits.append(c.key + (f" at {c.where}" if c.where else ""))
    elif c.where:
        bits.append(c.where)
    if c.source:
        bits.append(f"raised at {c.source}")
    return "; ".join(bits)


def _fixes(r, c) -> tuple[list, str]:
    """What to change for check *c* and what proved it: the pre-flight's suggestions, or the memory's advice."""
    if c.suggestions:
        return list(c.suggestions), "each proved: mindformers' checks pass with it"
    if c.check.startswith("per-card memory") and r.memory is not None:
        from .advice import memory_advice  # deferred: the estimate's arithmetic, only for a memory finding

        return [a.line() for a in memory_advice(r.memory)], "msnb's estimate; msnb preflight with the edit runs mindformers' checks on it"
    return [], ""


def _device_line(r) -> str:
    devices = f"at {r.devices} devices" if r.devices is not None else "device count unknown"
    return f"{r.config} {devices} ({r.devices_from}); mindformers {r.mindformers or '?'}; {r.seconds:.1f} s"


def _reason(r) -> str:
    """Why a result is not checked (msnb's limit or an unknown count), or ""."""
    if r.outcome == "failed" or r.outcome == "passed":
        return ""
    return r.headline().removeprefix("pre-flight not checked: ")


def _shown(r) -> list:
    """The rows shown first: findings, then warnings, then the rules that did not run (the reasons for NOT CHECKED)."""
    return r.findings + r.warnings + r.msnb_errors + r.not_checked


def _row_status(c) -> str:
    return {"failed": FAIL, "warning": WARN, "passed": PASS}.get(c.outcome, SKIP)


def _details_text(r) -> list:
    shown = {id(c) for c in _shown(r)}
    lines = ["  checks that ran:"]
    lines += [
        f"    [{status_word(_row_status(c))}] {c.check}" + (f": {c.message}" if c.message else "") for c in r.checks if id(c) not in shown and c.kind != "data"
    ]
    if r.data_rules:
        lines.append("  rules about the data, not run (the pre-flight does not open the dataset):")
        lines += [f"    {c.check}: {c.message}" for c in r.data_rules]
    lines += ["  stood in for the cluster:"] + [f"    {s}" for s in r.stood_in] if r.stood_in else []
    if r.memory is not None:
        lines += [""] + memory_text(r.memory, verbose=True, advice=False).splitlines()
    return lines


def preflight_text(r, verbose: bool = False, color_stream=None) -> str:
    """The pre-flight for a terminal: the verdict and counts, each finding with its fix, the warnings; the rest with *verbose*."""
    head = paint(f"msnb preflight {preflight_word(r)}", preflight_status(r), color_stream) if color_stream else f"msnb preflight {preflight_word(r)}"
    lines = [f"{head}: {preflight_counts(r)}", f"  {_device_line(r)}"]
    if r.error:
        lines.append(f"  could not check: {r.error} (msnb's limit, not the config's fault)")
    elif _reason(r):
        lines.append(f"  not checked: {_reason(r)}")
    for c in _shown(r):
        lines.append(f"  [{status_word(_row_status(c))}] {c.check}: {c.message}")
        if _where(c):
            lines.append(f"         {_where(c)}")
        fixes, proof = _fixes(r, c)
        if fixes:
            lines.append(f"         fix ({proof}):")
            lines += [f"           {f}" for f in fixes]
    memory = next((c for c in r.checks if c.check.startswith("per-card memory") and c.outcome == "passed"), None)
    if memory is not None:
        lines.append(f"  memory: {memory.message}")
    if verbose:
        lines += _details_text(r)
    else:
        extra = [f"{count(len(r.data_rules), 'rule')} about the data"] if r.data_rules else []
        extra += ["what stood in"] if r.stood_in else []
        extra += ["the memory table"] if r.memory is not None else []
        passed = sum(c.outcome == "passed" for c in r.checks)
        lines.append(f"  {count(passed, 'check')} passed; --verbose lists them" + (f", {', '.join(extra)}" if extra else ""))
    return "\n".join(lines)


def _html_row(r, c) -> str:
    status = _row_status(c)
    where = f"<br><small style='color:{MUTED}'>{html.escape(_where(c))}</small>" if _where(c) else ""
    fixes, proof = _fixes(r, c)
    fix = ""
    if fixes:
        items = "".join(f"<li><code>{html.escape(f)}</code></li>" for f in fixes)
        fix = f"<div style='margin-top:4px'><b>fix</b> <small style='color:{MUTED}'>({html.escape(proof)})</small>:<ul style='margin:2px 0'>{items}</ul></div>"
    return (
        f"<tr style='vertical-align:top'><td style='color:{COLORS[status]};font-weight:bold'>{status_word(status)}</td>"
        f"<td style='text-align:left'><code>{html.escape(c.check)}</code><br>{html.escape(c.message)}{where}{fix}</td></tr>"
    )


def _details_html(r) -> str:
    shown = {id(c) for c in _shown(r)}
    rest = [c for c in r.checks if id(c) not in shown and c.kind != "data"]
    rows = "".join(
        f"<tr><td style='color:{COLORS[_row_status(c)]};font-weight:bold'>{status_word(_row_status(c))}</td>"
        f"<td style='text-align:left'><code>{html.escape(c.check)}</code>{(': ' + html.escape(c.message)) if c.message else ''}</td></tr>"
        for c in rest
    )
    parts = [f"<table>{rows}</table>"]
    if r.data_rules:
        items = "".join(f"<li><code>{html.escape(c.check)}</code>: {html.escape(c.message)}</li>" for c in r.data_rules)
        parts.append(f"<p>Rules about the data, not run (the pre-flight does not open the dataset):</p><ul>{items}</ul>")
    if r.stood_in:
        parts.append("<p>Stood in for the cluster:</p><ul>" + "".join(f"<li>{html.escape(said)}</li>" for said in r.stood_in) + "</ul>")
    summary = f"details: {count(len(rest), 'other check')}" + (f", {count(len(r.data_rules), 'rule')} about the data" if r.data_rules else "")
    summary += ", what stood in" if r.stood_in else ""
    return f"<details><summary>{html.escape(summary)}</summary>{''.join(parts)}</details>"


def preflight_html(r) -> str:
    """The pre-flight for a notebook: the coloured verdict, the findings with their fixes, the rest and the memory folded."""
    color = COLORS[preflight_status(r)]
    parts = [
        f"<div class='msnb-preflight'><b class='msnb-verdict' style='color:{color}'>msnb preflight {html.escape(preflight_word(r))}</b>: "
        f"{html.escape(preflight_counts(r))}<br><small style='color:{MUTED}'>{html.escape(_device_line(r))}</small>"
    ]
    if r.error:
        parts.append(f"<p>could not check: {html.escape(r.error)} (msnb's limit, not the config's fault)</p>")
    elif _reason(r):
        parts.append(f"<p>not checked: {html.escape(_reason(r))}</p>")
    if _shown(r):
        parts.append("<table>" + "".join(_html_row(r, c) for c in _shown(r)) + "</table>")
    parts.append(_details_html(r))
    if r.memory is not None:
        parts.append(memory_html(r.memory, advice=False, headline=False, refusals=False))  # the refusals are findings above
    parts.append("</div>")
    return "".join(parts)


# ---- the per-card memory --------------------------------------------------------------------------------------------


def memory_word(est) -> str:
    """FAILED (mindformers refuses the launch, or the largest stage does not fit), NOT CHECKED (no card), PASSED (fits)."""
    if est.refusals or est.fits is False:
        return "FAILED"
    return "NOT CHECKED" if est.fits is None else "PASSED"


def memory_status(est) -> str:
    return {"FAILED": FAIL, "NOT CHECKED": WARN, "PASSED": PASS}[memory_word(est)]


def memory_headline(est) -> str:
    """``FAILED: mindformers refuses this launch; fits: the largest stage ...``: the word and why, one line."""
    why = "mindformers refuses this launch; " if est.refusals else ""
    return f"{memory_word(est)}: {why}{est.memory_verdict()}"


def _stage_table(est) -> list:
    """The rows per stage, largest first; a "step copy" column (what the optimizer step holds beyond the activations)
    only where some stage has one, so that every total is the sum of its row."""
    step = any(s.step_extra for s in est.stages)
    head = ("stage", "layers", "weights", "grads", "optimizer", "act/micro", "in flight", "activations", *(("step copy",) if step else ()), "total GiB")
    rows = [head]
    for s in sorted(est.stages, key=lambda s: (-s.total, s.stage)):
        rec = " (full recompute)" if s.full_recompute_layers == s.layers and s.layers else ""
        values = (s.weights, s.gradients, s.optimizer, s.activations_per_micro_batch)
        extra = (_gib(s.step_extra),) if step else ()
        rows.append((str(s.stage), f"{s.layers}{rec}", *(_gib(v) for v in values), str(s.micro_batches_in_flight), _gib(s.activations), *extra, _gib(s.total)))
    return rows


def _gib(n: float) -> str:
    return f"{n / (1 << 30):,.1f}"


def _memory_intro(est) -> list:
    lay = est.layout
    return [
        f"{est.parameters / 1e9:,.2f} B parameters (sizes from {est.sizes_from}); {lay.words()}",
        f"micro-batch {est.micro_batch} x {est.seq} tokens per card",
        *[f"note: {n}" for n in est.notes],
    ]


def memory_text(est, verbose: bool = False, advice: bool = True, color_stream=None) -> str:
    """The per-card memory for a terminal: the verdict, what mindformers refuses, what to change, the table; what is not
    counted with *verbose* (else one line saying so)."""
    head = f"msnb memory {memory_word(est)}"
    head = paint(head, memory_status(est), color_stream) if color_stream else head
    lines = [f"{head}: {memory_headline(est).split(': ', 1)[1]}", f"  {est.config}"]
    lines += [f"  REFUSED: {r}" for r in est.refusals]
    if advice:
        from .advice import memory_advice  # deferred: the estimate's arithmetic, only when something is wrong

        fixes = memory_advice(est)
        if fixes:
            lines.append("  fix (msnb's estimate; msnb preflight with the edit runs mindformers' checks on it):")
            lines += [f"    {a.line()}" for a in fixes]
    lines += [f"  {line}" for line in _memory_intro(est)]
    rows = _stage_table(est)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines += ["  " + "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    gathered = max((s.gathered for s in est.stages), default=0)
    if gathered:
        lines.append(f"  weights include up to {_gib(gathered)} GiB the parallel optimizer all-gathered and keeps from the forward to the backward pass")
    step = _step_note(est)
    if step:
        lines.append(f"  {step}")
    if verbose:
        lines += ["  not counted:"] + [f"    - {item}" for item in est.leaves_out]
    else:
        lines.append(f"  not counted: {len(est.leaves_out)} things (communication buffers, MindSpore's planner and workspace, ...): --verbose lists them")
    return "\n".join(lines)


def _step_note(est) -> str:
    """What the table's "step copy" column is, where a stage has one: at the optimizer step, mindformers' pipeline (or
    gradient-accumulation) wrapper's scaled copy of the accumulated gradients, beyond the activations the backward pass
    held and freed; empty elsewhere."""
    over = sorted(s.stage for s in est.stages if s.step_extra > 0)
    if not over:
        return ""
    return (
        f"step copy (stage{'s' if len(over) > 1 else ''} {', '.join(map(str, over))}): the optimizer step's copy of the accumulated gradients, "
        "beyond the activations by then freed (mindformers' pipeline wrapper scales accu_grads into new tensors at the step)"
    )


def _figure_img(est) -> str:
    from ..plot.render import figure_png  # deferred: matplotlib
    from .figure import memory_figure  # deferred: matplotlib

    png = base64.b64encode(figure_png(memory_figure(est))).decode()
    return f'<img class="msnb-figure" src="data:image/png;base64,{png}"/>'


def memory_html(est, advice: bool = True, headline: bool = True, refusals: bool = True) -> str:
    """The per-card memory for a notebook: the verdict, the refusals and the fix, the picture; the table and what is not counted folded."""
    parts = ["<div class='msnb-memory'>"]
    word, why = memory_headline(est).split(": ", 1)
    label = "msnb memory" if headline else "per-card memory"
    # the verdict and refusals in a block of their own: an image right after running text split its last words off below it
    parts.append(f"<div><b style='color:{COLORS[memory_status(est)]}'>{label} {word}</b>: {html.escape(why)}")
    parts += [f"<br><b style='color:{COLORS[FAIL]}'>REFUSED</b>: {html.escape(r)}" for r in est.refusals if refusals]
    parts.append("</div>")
    if advice:
        from .advice import memory_advice  # deferred: the estimate's arithmetic

        fixes = memory_advice(est)
        if fixes:
            items = "".join(f"<li><code>{html.escape(a.change)}</code>: {html.escape(a.gives)}</li>" for a in fixes)
            parts.append(
                f"<div><b>fix</b> <small style='color:{MUTED}'>(msnb's estimate; msnb preflight with the edit runs mindformers' checks on it)</small>:<ul>{items}</ul></div>"
            )
    parts.append(_figure_img(est))
    rows = _stage_table(est)
    table = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in rows[0]) + "</tr>"
    table += "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
    intro = "".join(f"<li>{html.escape(line)}</li>" for line in [*_memory_intro(est), _step_note(est)] if line)
    left = "".join(f"<li>{html.escape(item)}</li>" for item in est.leaves_out)
    parts.append(
        f"<details><summary>the table per stage (GiB a card), and the {len(est.leaves_out)} things the estimate does not count</summary>"
        f"<ul>{intro}</ul><table>{table}</table><p>Not counted:</p><ul>{left}</ul></details></div>"
    )
    return "".join(parts)


__all__ = ["ShownOnce", "memory_html", "memory_text", "memory_word", "paint", "preflight_counts", "preflight_html", "preflight_text", "preflight_word"]
