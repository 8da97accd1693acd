"""Tournament grading for environment-auditing benchmarks.

Runs list issues; a judge merges duplicates per environment into canonical lists (saved,
hand-editable); every pair of auditors plays a match per environment; Bradley-Terry ratings on
the Elo scale with bootstrap intervals. See `schema.py` for the files written and
`grader.grade_tournament` / `grader.rate_from_canonical` for the entry points.
"""
