"""benchmarks/run_all.py rewrites docs/performance.md's tables and keeps the page's prose."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import run_all  # noqa: E402

OLD = """# CPU backend performance

old head

## AVX-512: X (znver5), 2 cores, measured 2026-12-01

old table

## More

- hand-written list

## Memory

measured by hand

## Where the time goes

hand-edited notes

## How this was measured

old env
"""

NEW = """# CPU backend performance

new head

## AVX-512: X (znver5), 2 cores, measured 2026-12-08

new table

## More

- generated list

## Where the time goes

the script's own notes

## How this was measured

new env
"""


def test_the_tables_are_rewritten_and_the_prose_kept_where_it_stood():
    out = run_all.splice(OLD, NEW)
    heads = [h for h, _ in run_all._sections(out)]
    assert heads == [None, "## AVX-512: X (znver5), 2 cores, measured 2026-12-08", "## More", "## Memory",
                     "## Where the time goes", "## How this was measured"]
    assert "new table" in out and "old table" not in out and "new env" in out and "new head" in out
    assert "hand-written list" in out and "measured by hand" in out and "hand-edited notes" in out
    assert "generated list" not in out and "the script's own notes" not in out


def test_a_new_page_is_written_whole_and_a_section_without_its_anchor_is_kept_at_the_end():
    assert run_all.splice(None, NEW) == NEW
    old = OLD.replace("## AVX-512: X", "## Some level gone: X")  # its section no longer generated
    out = run_all.splice(old, NEW)
    assert "old table" in out and out.count("## How this was measured") == 1
