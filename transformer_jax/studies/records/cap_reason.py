"""Why a plateau budget's cap stopped a study where it did, in words for its results page: which
arms were still gaining at the cap, how long the study's suite took at that cap against the
suite's limit (its suite-<suite>.json, `suite_time`), and whether one more stage would have fit.

The estimate of one more stage scales the suite's measured time by steps ((cap + step) / cap):
training is most of a plateau suite's time, and the part that does not grow with steps
(compiling, probes, reports) makes it an overestimate. Pure functions of the records.
"""
from __future__ import annotations

from typing import Any, Optional

from transformer_jax.studies.records import suite_time

TITLE = "**Why the cap stopped it here.**"


def still_gaining(plateau: dict[str, Any]) -> list[str]:
    """The judged arms that had not flattened at the budget reached (the cap): by name, in the
    record's order; an arm whose every run diverged has no gain and is not among them."""
    return [arm for arm, a in plateau["arms"].items()
            if a["late_gain"] is not None and not a["flattened"]]


def next_stage_seconds(wall_s: float, cap: int, step: int) -> float:
    """The suite's time with one more stage of `step` steps for every run, scaled by steps."""
    return wall_s * (cap + step) / cap


def cap_lines(record: dict[str, Any], suite_name: str, suite: Optional[dict[str, Any]],
              limit_minutes: Optional[int]) -> list[str]:
    """The paragraph under a plateau budget's table when the cap stopped it ([] otherwise):
    `suite` is the time record of the study's suite `suite_name` (None: not recorded; one of
    another size than the record's does not count), `limit_minutes` its limit (None: none)."""
    p = record.get("plateau")
    if not p or p["stopped_by"] != "cap":
        return []
    arms = still_gaining(p)
    their = "its" if len(arms) == 1 else "their"
    gaining = (f"At {p['cap']} steps {', '.join(arms)} still gained more than "
               f"{p['amount']:g} over {their} last 20 % of steps (the table)" if arms else
               f"At {p['cap']} steps an arm was still gaining")
    words = [TITLE, f"{gaining}.",
             "The cap is the registered design's, set before the run."]
    if suite is None or suite["size"] != record.get("size", suite["size"]):
        words.append(f"No time of suite `{suite_name}` at this size is recorded, "
                     "so whether one more stage would fit its limit is not known.")
        return [" ".join(words), ""]
    took = suite_time.minutes(suite["wall_s"])
    machine = f"{suite['machine']['cpu']}, {suite['machine']['cpus']} CPUs, {suite['end'][:10]}"
    words.append(f"Its suite `{suite_name}` took {took} at this cap ({machine}).")
    if limit_minutes is None:
        words.append("The suite has no time limit of its own.")
        return [" ".join(words), ""]
    more = next_stage_seconds(suite["wall_s"], p["cap"], p["step"])
    others = len(suite["studies"]) > 1  # they would not train on: the estimate bounds it
    fits = more <= 60 * limit_minutes
    if fits:
        verdict = (f"within its limit of {limit_minutes} min: a higher cap fits this suite, a "
                   "design to register anew, not a change to this one.")
    elif others:
        verdict = (f"over its limit of {limit_minutes} min by this bound, so whether the suite "
                   "could go further is not shown.")
    else:
        verdict = f"over its limit of {limit_minutes} min: the suite could not go further."
    bound = ", an upper bound: the suite's other studies would not train on" if others else ""
    words.append(
        f"One more stage ({p['step']} steps for every run) would take it to about "
        f"{suite_time.minutes(more)} (its time × {p['cap'] + p['step']}/{p['cap']}{bound}), "
        + verdict)
    return [" ".join(words), ""]
