"""The whole bad-input catalogue: each program's rows (reliability_cases_<program>.py, in the order of
PROGRAMS), then each topic's module. Every row module builds its rows from reliability_setup.py's
helpers; this module only joins them, so nothing imports back."""

from __future__ import annotations

from checkhelpers import (
    reliability_cases_answers,
    reliability_cases_bitexact_classes,
    reliability_cases_bitexact_found,
    reliability_cases_bitexact_goldens,
    reliability_cases_bitexact_inputs,
    reliability_cases_entrypoint,
    reliability_cases_fleet,
    reliability_cases_formats,
    reliability_cases_gpu_checks,
    reliability_cases_http,
    reliability_cases_launcher,
    reliability_cases_launcher_env,
    reliability_cases_lock_os,
    reliability_cases_pinlock,
    reliability_cases_writes,
)
from checkhelpers.reliability_setup import COMMAND_NAMES, PROGRAMS, REPO, Case

__all__ = ["CASES", "COMMAND_NAMES", "PROGRAMS", "REPO", "Case"]

CASES: list[Case] = [
    *reliability_cases_bitexact_inputs.CASES,  # command line, engine strings, prompts, --out, recipes, warm
    *reliability_cases_bitexact_goldens.CASES,  # what a server answers, goldens
    *reliability_cases_bitexact_classes.CASES,  # one mechanism per class of bad input
    *reliability_cases_bitexact_found.CASES,  # what the fuzzer found, the classes' further inputs
    *reliability_cases_pinlock.CASES,
    *reliability_cases_launcher.CASES,
    *reliability_cases_entrypoint.CASES,
    *reliability_cases_gpu_checks.CASES,
    *reliability_cases_fleet.CASES,
    *reliability_cases_writes.CASES,  # a golden's write, --out's files, paths that are not UTF-8
    *reliability_cases_formats.CASES,  # the shared file reader and schema check
    *reliability_cases_http.CASES,  # bitexact's HTTP exchange
    *reliability_cases_launcher_env.CASES,  # the launcher's environment values
    *reliability_cases_lock_os.CASES,  # pinlock and the operating system
    *reliability_cases_answers.CASES,  # answer fields, self-reports, resume keys
]
