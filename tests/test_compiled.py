"""numba's set-up (:mod:`aiblox.compiled`): OpenMP workers sleep between kernels unless told
otherwise (spinning workers made a sweep's short kernels 5x slower on a busy machine)."""

from __future__ import annotations

import os
import subprocess
import sys

_PROBE = ("import os; import aiblox.fusion.kernels; "
          "print(os.environ.get('OMP_WAIT_POLICY'))")


def _probe(env: dict[str, str]) -> str:
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                         text=True, check=True)
    return out.stdout.strip()


def test_workers_sleep_between_kernels_by_default() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    assert _probe(env) == "PASSIVE"


def test_a_wait_policy_already_set_is_kept() -> None:
    assert _probe({**os.environ, "OMP_WAIT_POLICY": "ACTIVE"}) == "ACTIVE"


def test_default_threads_are_the_cores_other_work_leaves_free() -> None:
    from aiblox.sweep.runner import default_jobs, free_cores

    assert free_cores(2, 0.0) == 2      # an idle machine: every core
    assert free_cores(2, 1.0) == 2      # this sweep alone running
    assert free_cores(2, 2.0) == 1      # one other job
    assert free_cores(2, 10.0) == 1     # a busy machine: one thread, never none
    assert free_cores(16, 4.2) == 13
    assert 1 <= default_jobs() <= (os.cpu_count() or 1)
