"""`benchctl scan`: questions asked of every transcript of a results directory.

A scanner (spec.py) is declared in TOML: `kind = "grep"` matches a regular expression against the
parts of a transcript it names (grep.py), `kind = "llm"` asks the judge a question about them
(llm.py) and must cite the events it relies on. The modules, in the order data flows:

    spec        the scanner format, its checks and its hash
    registry    scanners by name (builtins/) or file
    parts       a transcript's messages, reasoning, tool calls, tool results and target replies,
                each numbered by its event
    segments    those parts as judge-readable text, split to fit the judge's context
    grep, llm   the two kinds of scanner; answers.py: answer types, hits, combining segments
    result      scans/<scanner>/<run_id>.json
    runner      every run, resumably, through the one Judge and its cost cap
    validate    a scanner against human labels: accuracy, precision, recall, F1, balanced accuracy

A scanner is a `Scanner` (spec.py); a plugin declares one as an entry point in `benchctl.scanners`
(registry.py), usually made from the same keys a TOML file has with `parse_scanner`.
"""

from benchctl.scan.spec import Scanner, ScannerError, parse_scanner

__all__ = ["Scanner", "ScannerError", "parse_scanner"]
