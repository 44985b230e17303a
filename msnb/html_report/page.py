"""The pieces of a self-contained HTML page: escaped text, capped tables, embedded figures, the page shell.

Everything that came from a file (tag and run names, config values, problem
messages) passes through :func:`esc`; nothing here names a URL, a script or a
font, so the page reads the same offline, with JavaScript off and on paper.
"""

from __future__ import annotations

import base64
import html

from ..status import FAIL, PASS, SEVERITY_STATUS, SKIP, WARN, status_css, status_word, verdict_word
from ..words import count

MAX_ROWS = 200  # rows a table shows before it says how many it left out
MAX_TEXT = 20_000  # characters of one text block (a config, a logged text) before it is cut

# even if something slipped through escaping, the browser runs no script and fetches nothing
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
# the contents' links: "#anchor" in the file; in a notebook's srcdoc frame "#anchor" resolves against the
# notebook's own URL (clicking it loaded JupyterLab's login page into the frame), "about:srcdoc#anchor" is the
# frame's own document, so the browser scrolls, with no script and the CSP above unchanged
CONTENTS_LINK = 'href="#'
FRAME_CONTENTS_LINK = 'href="about:srcdoc#'
STATUS_CLASS = {status_word(s): s for s in (PASS, WARN, FAIL, SKIP)} | {verdict_word(True): PASS, verdict_word(False): FAIL, "FLAG": FAIL}

CSS = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 0 auto; max-width: 1100px;
       padding: 1.5em; color: #1f2328; background: #fff; line-height: 1.4; }
h1 { font-size: 1.6em; margin: 0 0 .2em; } h2 { font-size: 1.3em; border-bottom: 1px solid #d0d7de; padding-bottom: .2em; margin-top: 1.6em; }
h3 { font-size: 1.05em; margin: 1.1em 0 .4em; }
.meta { color: #59636e; font-size: .9em; margin: 0; }
nav ol { columns: 2; font-size: .95em; } nav a { color: #0969da; }
table { border-collapse: collapse; margin: .4em 0 1em; font-size: .9em; max-width: 100%; }
td { overflow-wrap: break-word; } td.path { word-break: break-all; }
th, td { border: 1px solid #d0d7de; padding: .25em .55em; text-align: left; vertical-align: top; }
th { background: #f6f8fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
STATUS_CSS
.verdict { font-size: 1.25em; margin: .6em 0; } .note { color: #59636e; font-style: italic; }
figure { margin: .6em 0 1.2em; } figure img { max-width: 100%; height: auto; box-sizing: border-box; border: 1px solid #eaeef2; }
figcaption { color: #59636e; font-size: .85em; }
pre { background: #f6f8fa; padding: .6em; overflow-x: auto; white-space: pre-wrap; word-break: break-word; font-size: .85em; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; }
@page { margin: 14mm; }
@media print {
  body { max-width: none; padding: 0; font-size: 10pt; }
  nav { display: none; }
  h2 { break-after: avoid; } figure, tr, pre { break-inside: avoid; }
  a { color: inherit; text-decoration: none; }
  pre { white-space: pre-wrap; }
}
""".replace("STATUS_CSS", status_css())  # the status colours, from msnb.status


def esc(value) -> str:
    """*value* as HTML text (quotes too, so it is safe inside attributes); a NUL becomes U+FFFD, as HTML parsers read it."""
    return html.escape(str(value), quote=True).replace("\0", "\ufffd")


def status(word: str) -> str:
    """A PASS / WARN / FAIL / SKIP word, coloured by its class."""
    cls = STATUS_CLASS.get(word.upper(), "")
    return f'<span class="{cls}">{esc(word)}</span>' if cls else esc(word)


def severity(value) -> str:
    """A finding's severity (error / warning / info), coloured like FAIL / WARN."""
    word = str(value)
    cls = SEVERITY_STATUS.get(word, "")
    return f'<span class="{cls}">{esc(word)}</span>' if cls else esc(word)


def cut(text: str, limit: int = MAX_TEXT) -> str:
    """*text*, cut to *limit* characters with a note of how much was left out."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}\n... ({len(text) - limit:,} more characters left out)"


def pre(text: str, limit: int = MAX_TEXT) -> str:
    """*text* as a preformatted block, escaped and cut to *limit* characters."""
    return f"<pre>{esc(cut(text, limit))}</pre>"


def note(text: str) -> str:
    """A remark in the page's quiet style (what was left out, what was not recorded)."""
    return f'<p class="note">{esc(text)}</p>'


def table(header, rows, *, limit: int = MAX_ROWS, raw_columns=(), numeric=(), paths=()) -> str:
    """An HTML table of *rows* (iterables of cells), at most *limit* of them.

    Args:
        header: the column names.
        rows: the rows; cells are escaped except in *raw_columns* (indices of cells already HTML).
        limit: rows shown; the rest are counted in a line under the table.
        raw_columns: column indices whose cells are trusted HTML built by this package.
        numeric: column indices aligned right.
        paths: column indices holding file paths (broken anywhere rather than widening the page).

    Returns:
        The HTML text.
    """
    rows = list(rows)
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for row in rows[:limit]:
        cells = []
        for i, cell in enumerate(row):
            text = cell if i in raw_columns else esc(cell)
            cls = "num" if i in numeric else "path" if i in paths else ""
            cells.append(f'<td class="{cls}">{text}</td>' if cls else f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = note(f"{count(len(rows) - limit, 'more row', thousands=True)} left out; the full data: msnb export or msnb.read()") if len(rows) > limit else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


def figure(png: bytes, alt: str, caption: str = "") -> str:
    """A PNG embedded as a data URI, with its alt text (what the figure shows) and a caption."""
    data = base64.b64encode(png).decode("ascii")
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f'<figure><img src="data:image/png;base64,{data}" alt="{esc(alt)}">{cap}</figure>'


def section(anchor: str, title: str, body: str) -> str:
    """One ``<section>`` with its heading; *anchor* is a fixed id chosen by this package, never from data."""
    return f'<section id="{anchor}"><h2>{esc(title)}</h2>{body}</section>'


def document(title: str, header: str, sections: list[tuple[str, str, str]]) -> str:
    """The whole page: title, header block, a table of contents and the sections (anchor, title, body)."""
    toc = "".join(f'<li><a {CONTENTS_LINK}{anchor}">{esc(name)}</a></li>' for anchor, name, _ in sections)
    body = "".join(section(anchor, name, html_body) for anchor, name, html_body in sections)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>"
        f"<body><header>{header}</header><nav><h2>Contents</h2><ol>{toc}</ol></nav>{body}</body></html>\n"
    ).replace("\0", "\ufffd")  # a NUL from a tag, a text or a path that reached the page by any route


def for_frame(page: str) -> str:
    """*page* as an ``<iframe srcdoc>`` holds it: the contents' links point at the frame's document, not the notebook's URL.

    Text from the data cannot hold ``href="#`` (:func:`esc` turns the quote
    into ``&quot;``), so only this package's own links are rewritten.
    """
    return page.replace(CONTENTS_LINK, FRAME_CONTENTS_LINK)
