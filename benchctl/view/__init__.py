"""`benchctl view`: a local, read-only web app over one results directory — the sweep's runs
(live while they run), each run's transcript as a timeline or a conversation, its artifacts next
to their grades, two runs side by side, the tournament and the report tables.

    app.py               routes, security headers (CSP), the live event stream
    sweep.py live.py     runs listed from the report loader; runs in progress and their live figures
    transcript_index.py  byte-offset index of a transcript: windows, search, growth
    runpage.py events.py the run page: header, prompt (benchctl/task_prompt.py), timeline window,
                         minimap, what a live run waits for; events prepared for templates
    reasoning.py conversation.py   reasoning blocks (opaque data kept out of the page); events
                         grouped as a conversation
    links.py             the viewer paths of a report row's runs (also used by the HTML report)
    grades.py compare.py tournament.py   artifacts with grades; two runs; ratings.json
    paths.py             the only place that turns URL names into paths (inside the results dir)
    render.py            markdown (no HTML, no links or images followed) and the Jinja environment
    templates/ static/   Jinja templates (autoescape on); plain JS and CSS, no build step

Nothing here writes into the results dir; see docs/view.md.
"""
