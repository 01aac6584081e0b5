"""What changed between two result sets: families, models and items that came or went, and
means that moved beyond their 95% interval."""

from __future__ import annotations

from ragmatrix.seam.tables import Line, Tables


def changes(old: Tables, new: Tables, shown: int = 5) -> list[str]:
    """One line per change, for the terminal and the report; empty when nothing changed."""
    out: list[str] = []
    old_families = {t.family: t for t in old.families}
    new_families = {t.family: t for t in new.families}
    for family in sorted(set(new_families) - set(old_families)):
        out.append(f"{family}: new family ({_count(new_families[family].lines, 'model')})")
    for family in sorted(set(old_families) - set(new_families)):
        out.append(f"{family}: removed family")
    for family in sorted(set(old_families) & set(new_families)):
        before, after = old_families[family], new_families[family]
        old_lines = {line.model: line for line in before.lines}
        new_lines = {line.model: line for line in after.lines}
        for model in sorted(set(new_lines) - set(old_lines)):
            out.append(f"{family}: new model {model}: {_shown(new_lines[model])}")
        for model in sorted(set(old_lines) - set(new_lines)):
            out.append(f"{family}: removed model {model}")
        old_items = {(r.test, r.item) for r in before.rows}
        new_items = {(r.test, r.item) for r in after.rows}
        for label, items in (("new", new_items - old_items), ("removed", old_items - new_items)):
            if items:
                names = sorted({item for _, item in items})
                more = f", ... ({len(names) - shown} more)" if len(names) > shown else ""
                out.append(f"{family}: {len(names)} {label} item(s): {', '.join(names[:shown])}{more}")
        for model in sorted(set(old_lines) & set(new_lines)):
            was, now = old_lines[model], new_lines[model]
            if moved(was, now):
                out.append(f"{family}: {model} moved beyond its 95% CI: {_shown(was)} -> {_shown(now)}")
            if now.errors != was.errors or now.invalid != was.invalid:
                out.append(
                    f"{family}: {model} errors {was.errors} -> {now.errors}, invalid {was.invalid} -> {now.invalid}"
                )
    return out


def moved(was: Line, now: Line) -> bool:
    """The new mean lies outside the old 95% interval, or the old mean outside the new one."""
    if was.mean is None or now.mean is None:
        return was.mean is not now.mean
    outside_old = was.low is not None and was.high is not None and not was.low <= now.mean <= was.high
    outside_new = now.low is not None and now.high is not None and not now.low <= was.mean <= now.high
    return outside_old or outside_new


def _shown(line: Line) -> str:
    if line.mean is None:
        return f"no score ({line.errors} error(s))"
    interval = "" if line.low is None or line.high is None else f" [{line.low:.3f}, {line.high:.3f}]"
    return f"{line.mean:.3f}{interval}, n={line.n}"


def _count(lines: list[Line], noun: str) -> str:
    return f"{len(lines)} {noun}{'' if len(lines) == 1 else 's'}"
