"""One colour table for every chart of the HTML report (figures.COLOURS), in which every phase,
each idle kind included, has a colour of its own."""

from __future__ import annotations

import itertools

import numpy as np

from verifyprof.contracts import phases
from verifyprof.report.figures import COLOURS, marker

MIN_DELTA_E = 20.0  # CIE76 distance in L*a*b*: under ~10 two swatches read as one colour


def lab(colour: str) -> np.ndarray:
    """sRGB hex -> CIE L*a*b* (D65)."""
    rgb = np.array([int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    rgb = np.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    x, y, z = xyz @ rgb / np.array([0.95047, 1.0, 1.08883])
    f = [np.cbrt(t) if t > 0.008856 else 7.787 * t + 16 / 116 for t in (x, y, z)]
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_every_phase_has_a_colour_in_the_table():
    assert set(phases.ALL) <= set(COLOURS)


def test_no_two_phases_look_alike():
    """Each idle kind (host_wait, launch_gap, graph_launch, graph_gap, other_work) included, and
    the timeline's host row."""
    names = list(phases.ALL) + ["host call"]
    close = [
        f"{a} {COLOURS[a]} ~ {b} {COLOURS[b]} (dE {d:.1f})"
        for a, b in itertools.combinations(names, 2)
        if (d := float(np.linalg.norm(lab(COLOURS[a]) - lab(COLOURS[b])))) < MIN_DELTA_E
    ]
    assert close == []


def test_idle_phases_are_hatched_and_busy_ones_are_not():
    for phase in phases.ALL:
        idle = phase in phases.IDLE + phases.OTHER
        assert ("pattern" in marker(phase)) == idle, phase
