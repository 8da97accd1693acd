"""`benchctl report`: leaderboards, breakdowns, any-of-N and tournament tables, plots, exports.

Pipeline: `load.load_results` (runs + grades from disk, cached) -> `build.build_report` (a
`model.Report` of raw-valued tables + provenance + warnings) -> a renderer (`render_terminal`,
`render_text` for markdown/csv/json, `html`) and optionally `plots.make_plots`.
"""
