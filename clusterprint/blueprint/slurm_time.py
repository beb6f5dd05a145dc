"""Slurm time strings, read the way Slurm 22.05 and 23.11 read them.

slurm.conf's partition ``MaxTime`` and ``DefaultTime`` go through ``time_str2mins``
(src/common/parse_time.c, the same code in 22.05 and 23.11): ``time_str2secs`` sums days,
hours, minutes and seconds in a signed 32-bit ``int``, then ``time_str2mins`` rounds up
with ``(secs + 59) / 60``, still in that ``int``. read_config.c refuses a negative result
that is not ``INFINITE``. So a limit past the bound below is refused or, once the sum
or a field overflows ``int``, silently wraps to another value. Proven on slurmctld 22.05:
tests/slurm/test_generated_blueprints.py boots the bounds, test_slurm_limits.py shows
what happens past them.
"""

from __future__ import annotations

#: Words Slurm reads as "no limit" (xstrcasecmp in time_str2secs).
UNLIMITED_WORDS = frozenset({"UNLIMITED", "INFINITE"})

#: The longest time limit in minutes: 35,791,393 x 60 + 59 is the last sum below 2**31.
#: One minute more and slurmctld exits with 'Bad value "35791394" for MaxTime'.
MAX_MINUTES = (2**31 - 1 - 59) // 60


def slurm_time_seconds(text: str) -> int | None:
    """The seconds a Slurm time of SLURM_TIME_PATTERN stands for; None for no limit.

    Fields as Slurm's sscanf reads them: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``,
    ``D-H:M:S``. Python integers never wrap, so an overlong value stays overlong.
    """
    if text.upper() in UNLIMITED_WORDS:
        return None
    days, _, clock = text.rpartition("-")
    fields = [int(part) for part in clock.split(":")]
    if days:
        hours, minutes, seconds = (fields + [0, 0])[:3]
    elif len(fields) == 3:
        hours, minutes, seconds = fields
    else:
        hours, (minutes, seconds) = 0, (fields + [0])[:2]
    return ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds


def slurm_minutes(seconds: int) -> int:
    """Whole minutes Slurm keeps for a limit of ``seconds``: it rounds up."""
    return -(-seconds // 60)


def format_minutes(minutes: int) -> str:
    """A limit in minutes as scontrol prints it (mins2time_str): D-HH:MM:SS or HH:MM:SS."""
    days, rest = divmod(minutes, 24 * 60)
    clock = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{clock}" if days else clock
