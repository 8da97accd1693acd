"""Hidden-behaviour audits: a target model the investigator probes through tools.

spec.py          the task's [target] and [tools] tables -> TargetSpec, ToolsConfig, tool configurations
backend.py       one call to the target (chat, prefill, sample_user, raw complete) through the upstream layer
tools.py         TargetTools: the investigator's tools (conversations, scaffolded batches), recording, cost
scaffold.py      the auxiliary model that writes a batch of probe inputs
mcp.py           the same tools as an MCP server (streamable HTTP) on a gateway route
token_budget.py  pure token-budget policy (notices, final instruction, cut-off)
predictions.py   the predictions artifact format (what the any-of-N grader parses)
demo.py          scripted target / auxiliary / investigator used by configs/hidden-behaviour-demo and tests
"""
