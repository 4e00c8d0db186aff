"""Per-kind sections of report.json (`ReportSection`), kept in a registry (`REPORT_SECTIONS`).

A body kind that has something of its own to report about a fitted motion (an ODE body: its energy and its
solver's drift, `sysid.outputs.energy`) registers a section: its key in report.json (`name`), whether an
experiment has what it reports on (`applies`) and its value at the fitted theta (`compute`). `build_report`
(`sysid.outputs.report`) writes every registered section, in registry order: its value where it applies, None
where it does not, so that report.json has the same keys for every scene. A kind defined outside the package
adds its own with `register_report_section`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from gradsim_jax.sysid.experiment import Experiment
from gradsim_jax.sysid.outputs.energy import energy_report, has_energy


@dataclasses.dataclass(frozen=True)
class ReportSection:
    """One section of report.json, about one body kind (module docstring).

    name: its key in report.json. applies(exp) -> bool: whether the experiment has what it reports on (host
    side). compute(exp, theta) -> dict: its value at theta ({quantity name: value}, missing entries from the
    experiment's defaults), JSON-ready (numbers, lists, dicts, numpy arrays and scalars).
    """

    name: str
    applies: Callable[[Experiment], bool]
    compute: Callable[[Experiment, dict], Optional[dict]]


#: The sections report.json holds, in order: the ODE body's energy first.
REPORT_SECTIONS: list[ReportSection] = [ReportSection("energy", has_energy, energy_report)]


def register_report_section(section: ReportSection) -> ReportSection:
    """Add `section` to `REPORT_SECTIONS` (replacing the one of the same name, at the end).

    Args:
        section: the `ReportSection`.

    Returns:
        `section`.
    """
    if not isinstance(section, ReportSection):
        raise TypeError(f"a report section must be a sysid.outputs.sections.ReportSection, got "
                        f"{type(section).__name__}")
    REPORT_SECTIONS[:] = [s for s in REPORT_SECTIONS if s.name != section.name] + [section]
    return section


def unregister_report_section(name: str) -> None:
    """Remove the section called `name` from `REPORT_SECTIONS` (nothing when there is none).

    Args:
        name: the section's key in report.json.
    """
    REPORT_SECTIONS[:] = [s for s in REPORT_SECTIONS if s.name != name]


def section_values(exp: Experiment, theta: dict) -> dict:
    """{section name: its value} of every registered section: `compute(exp, theta)` where it applies, else None.

    Args:
        exp: the experiment fitted.
        theta: {quantity name: value}, the fitted quantities (missing entries from the experiment's defaults).

    Returns:
        The dict, in the order of `REPORT_SECTIONS`.
    """
    return {s.name: s.compute(exp, theta) if s.applies(exp) else None for s in REPORT_SECTIONS}
