"""Judge prompt templates: `{{name}}` placeholders, filled in one pass.

One pass matters for safety: the report is inserted as a value, and a report that contains
"{{reference}}" or "{{findings}}" must not have them expanded. Untrusted text is wrapped in
markers carrying a nonce derived from the text itself (so a report cannot contain its own
closing marker without inverting a hash) and the system prompt tells the judge that what is
between the markers is data, not instructions.
"""

from __future__ import annotations

import hashlib
import re

_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_]+)\s*\}\}")


class TemplateError(ValueError):
    pass


def render(template: str, **values: str) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in values:
            raise TemplateError(
                f"prompt template uses {{{{{name}}}}} but only {', '.join(sorted(values))} are available"
            )
        return values[name]

    return _PLACEHOLDER.sub(sub, template)


def nonce_for(*texts: str) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8", "replace"))
        h.update(b"\0")
    return h.hexdigest()[:12]


def delimit(text: str, nonce: str) -> str:
    """Untrusted text between <untrusted-NONCE> markers (any stray marker text is defused)."""
    tag = f"untrusted-{nonce}"
    body = text.replace(tag, "untrusted-(marker removed)")
    return f"<{tag}>\n{body}\n</{tag}>"
