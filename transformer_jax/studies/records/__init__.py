"""The records room: what a study's results files hold and where they came from. The verdict
record as data (record), the machine, stack and commit that produced it (provenance), the
design's history in git and its pre-registration (history, preregistration), a suite's time
(suite_time, cap_reason), and the copy of a sweep's results into experiments/results (export).
It reads runs' files and git; it renders nothing and runs nothing.
"""
