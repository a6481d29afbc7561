"""Huge pages for XLA's buffers: when the entry points re-execute themselves, and that they do."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from transformer_jax.runtime import hugepages

REPO = Path(__file__).resolve().parents[2]
GLIBC = (2, 36)


ASKED = {"TJ_HUGEPAGES": "1"}


def test_adds_the_tunable_when_asked_where_it_can_work():
    env = hugepages.environ_with_hugepages({"PATH": "/bin", **ASKED}, mode="madvise", glibc=GLIBC)
    assert env == {"PATH": "/bin", **ASKED, "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
    assert hugepages.active(env)
    kept = hugepages.environ_with_hugepages({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2", **ASKED},
                                            mode="madvise", glibc=GLIBC)
    assert kept["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"


def test_leaves_the_environment_alone_by_default_or_where_it_cannot_work():
    cases = [
        ({}, "madvise", GLIBC),  # not asked for: off by default (it costs the char LM)
        ({"TJ_HUGEPAGES": "0"}, "madvise", GLIBC),
        ({"TJ_HUGEPAGES": "yes"}, "madvise", GLIBC),  # only "1" asks
        (ASKED, "never", GLIBC),  # THP off in the kernel
        (ASKED, "always", GLIBC),  # every large mapping gets huge pages already
        (ASKED, None, GLIBC),  # no THP information (not Linux, container without /sys)
        (ASKED, "madvise", None),  # not glibc (musl, macOS)
        (ASKED, "madvise", (2, 31)),  # glibc without the tunable
        ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0", **ASKED}, "madvise", GLIBC),  # the user's
    ]
    for environ, mode, glibc in cases:
        assert hugepages.environ_with_hugepages(environ, mode=mode, glibc=glibc) is None, (environ, mode)
    assert not hugepages.active({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"})
    assert not hugepages.active({})


def test_thp_mode_reads_the_bracketed_choice(tmp_path):
    path = tmp_path / "enabled"
    path.write_text("always [madvise] never\n")
    assert hugepages.thp_mode(str(path)) == "madvise"
    assert hugepages.thp_mode(str(tmp_path / "missing")) is None


def test_entry_point_restarts_once_with_the_tunable_when_asked():
    """The same command runs again, with the tunable, and only once (no restart loop); without
    TJ_HUGEPAGES=1 it runs once, unchanged."""
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "TJ_HUGEPAGES")}
    env.update(ASKED)
    code = ("import os, sys; from transformer_jax.runtime import hugepages; "
            "hugepages.reexec_if_useful(); "
            "print('ran', os.environ.get('GLIBC_TUNABLES'), sys.argv[1:])")
    proc = subprocess.run([sys.executable, "-c", code, "arg1"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    expected = hugepages.environ_with_hugepages(env, mode=hugepages.thp_mode(),
                                                glibc=hugepages.glibc_version())
    if expected is None:  # this machine cannot use it: the command runs once, unchanged
        assert proc.stdout.splitlines() == ["ran None ['arg1']"]
        assert "restarting" not in proc.stderr
    else:
        assert proc.stdout.splitlines() == ["ran glibc.malloc.hugetlb=1 ['arg1']"]
        assert proc.stderr.count("restarting with GLIBC_TUNABLES") == 1
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={**env, "TJ_HUGEPAGES": ""}, timeout=120)
    assert proc.stdout.splitlines() == ["ran None []"] and "restarting" not in proc.stderr
