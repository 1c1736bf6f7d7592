"""The whole bad-input catalogue: the rows of reliability_cases.py, then each topic's module. The topic
modules build their rows from reliability_cases.py's helpers; this module only joins them, so nothing
imports back."""

from __future__ import annotations

import reliability_cases
import reliability_cases_answers
import reliability_cases_formats
import reliability_cases_http
import reliability_cases_launcher_env
import reliability_cases_lock_os
import reliability_cases_writes
from reliability_cases import COMMAND_NAMES, PROGRAMS, REPO, SOURCES, Case

__all__ = ["CASES", "COMMAND_NAMES", "PROGRAMS", "REPO", "SOURCES", "Case"]

CASES: list[Case] = [
    *reliability_cases.CASES,
    *reliability_cases_writes.CASES,  # a golden's write, --out's files, paths that are not UTF-8
    *reliability_cases_formats.CASES,  # the shared file reader and schema check
    *reliability_cases_http.CASES,  # bitexact's HTTP exchange
    *reliability_cases_launcher_env.CASES,  # the launcher's environment values
    *reliability_cases_lock_os.CASES,  # pinlock and the operating system
    *reliability_cases_answers.CASES,  # answer fields, self-reports, resume keys
]
