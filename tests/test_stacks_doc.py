"""docs/STACKS.md's install commands for the second set are the ones CI runs, and its table is the tested set."""

import re

from msnb.smoke.mindformers.tested_stack import TESTED
from tests.conftest import REPO

STACKS = (REPO / "docs" / "STACKS.md").read_text()


def test_ci_builds_the_second_set_with_the_documented_commands_in_order():
    block = re.search(r"<!-- setup: mindformers-2.0 -->\s*```bash\n(.*?)```", STACKS, re.S)
    assert block, "docs/STACKS.md lacks the mindformers-2.0 set-up block"
    documented = [line.strip() for line in block.group(1).splitlines() if line.strip()]
    ci_lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    where = [next((i for i, ci in enumerate(ci_lines) if ci == doc or ci.startswith(doc + " ")), None) for doc in documented]
    assert None not in where, dict(zip(documented, where))
    assert where == sorted(where)
    assert (REPO / "stacks" / "mindformers-2.0.txt").is_file()


def test_the_documented_table_is_the_tested_set():
    rows = re.findall(r"^\| [\d.]+(?: \(the extras\))? \| (\d+)\.(\d+)\.\d+ \| (\d+)\.(\d+)\.\d+ \|", STACKS, re.M)
    assert {((int(a), int(b)), (int(c), int(d))) for a, b, c, d in rows} == set(TESTED)
