"""``capture`` and ``hooks``: the capture stage's entries, as the CLI reaches them (the CLI
imports only the pipeline, the report and the contracts). Imported only when one of those
commands runs."""

from __future__ import annotations

from verifyprof.capture.flow import capture
from verifyprof.capture.hooks import api as hook_api
from verifyprof.capture.hooks.search_path import is_main_module, program_folder
from verifyprof.capture.load_axes import capture_loads, load_record, parse_values
from verifyprof.capture.log_results import parse_result_specs
from verifyprof.capture.request import CaptureOptions
from verifyprof.capture.results import summary_lines

__all__ = [
    "parse_result_specs",
    "CaptureOptions",
    "capture",
    "capture_loads",
    "hook_api",
    "is_main_module",
    "load_record",
    "parse_values",
    "program_folder",
    "summary_lines",
]
