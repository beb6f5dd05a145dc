"""The stand-ins a rendered recipe script runs under in the sandbox: srun, squeue and date,
each recording or answering as the test sets it (FAKE, FAKE_NOW, FAKE_LEFT)."""

from __future__ import annotations

from tests.support.paths import ROOT

STUBS = ROOT / "tests" / "clusterprint" / "render" / "stubs"
#: The clock of a start (seconds since the epoch), as `date +%s` tells the script.
NOW = 1_700_000_000
#: The training step: srun runs its last argument, the trainer (CLUSTERPRINT_RECIPE_PROGRAM).
SRUN_STUB = r"""#!/bin/bash
echo "srun $*" >>"$FAKE/calls"
exec "${@: -1}"
"""
#: The job's end as `squeue -o %e` prints it: $FAKE_LEFT seconds after the clock.
SQUEUE_STUB = r"""#!/bin/bash
[[ $* == "-h -j $SLURM_JOB_ID -o %e" ]] || { echo "squeue: unexpected $*" >&2; exit 1; }
date -d "@$((FAKE_NOW + FAKE_LEFT))" +%Y-%m-%dT%H:%M:%S
"""
#: The clock the test set; any other use of date is the real one.
DATE_STUB = r"""#!/bin/bash
if [[ $* == +%s ]]; then echo "$FAKE_NOW"; else exec /usr/bin/date "$@"; fi
"""
