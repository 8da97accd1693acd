"""Wiring hidden-behaviour audits into `benchctl run`: the tool configuration as a run dimension,
and the per-run target tools (native for ReAct, MCP route on the gateway for the CLIs).

    specs = expand_tool_configs(task_dir, specs, ["default", "prefill"])   # run ids get __<config>
    targets = RunTargets.start(task_dir, spec, gateway, transcript)        # None for other tasks
    HarnessContext(..., target_tools=targets.tools, token_budget=targets.token_budget)
    meta["target_tools"] = targets.summary(); targets.close()

The configuration travels in the spec's options as `tools` (what `benchctl report` groups by).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from benchctl.layout import make_run_id
from benchctl.targets.spec import (
    WITH_BASELINE,
    HiddenBehaviourTask,
    TargetSpecError,
    check_config,
    load_hidden_behaviour,
)

if TYPE_CHECKING:  # loaded by start() only when a task has a [target]
    from benchctl.targets.token_budget import TokenBudget
    from benchctl.targets.tools import TargetTools

OPTION = "tools"
DEFAULT_CONFIG = "default"


def expand_tool_configs(
    task_dir: str | Path, specs: list[Any], configs: list[str] | None, origin: str = "--tools"
) -> list[Any]:
    """Each run once per tool configuration (validated against the task's target); unchanged for
    a task without [target] (then asking for configurations is an error). `origin` names where
    the configurations came from (the flag, or a sweep file's key) in error messages."""
    hb = load_hidden_behaviour(task_dir)
    if hb is None:
        if configs:
            raise TargetSpecError(
                f"{origin} {', '.join(configs)}: the task {task_dir} declares no [target]. "
                f"Fix: drop the tool configurations, or add a [target] table (see configs/hidden-behaviour-demo)"
            )
        return specs
    names = list(dict.fromkeys(configs or [DEFAULT_CONFIG]))
    file = Path(task_dir) / "task.toml"
    from benchctl.run.preflight import check_model  # keys / base URLs / scripts, before anything runs

    check_model(hb.target.model, f"{file}: key `target.model`")
    for name in names:
        try:
            config = hb.config(name)
        except TargetSpecError as e:
            raise TargetSpecError(f"{origin}: {e}") from None
        check_config(hb.target, config, file)
        if config.scaffolded and config.auxiliary_model:
            check_model(config.auxiliary_model, f"{file}: key `tools.auxiliary_model` (configuration {name})")
        if hb.target.baseline_model and WITH_BASELINE & set(config.tools):
            check_model(hb.target.baseline_model, f"{file}: key `target.baseline_model` (configuration {name})")
        if config.white_box:  # the internals server answers and has the layers, SAE and oracle the tools need
            from benchctl.targets.whitebox_spec import WhiteBoxSpecError, check_server

            try:
                check_server(hb.target, config, file)
            except WhiteBoxSpecError as e:
                raise TargetSpecError(str(e)) from None
    out = []
    for s in specs:
        for name in names:
            rid = make_run_id(s.task, s.harness, s.model, s.budget, s.seed, s.variant, tools=name)
            out.append(replace(s, run_id=rid, options={**s.options, OPTION: name}))
    return out


@dataclass
class RunTargets:
    task: HiddenBehaviourTask
    tools: TargetTools  # HarnessContext.target_tools (a benchctl.harness.HostTools)
    token_budget: TokenBudget | None = None
    mcp: Any = None
    meta_key: ClassVar[Literal["target_tools"]] = "target_tools"  # where the runner puts summary() in meta.json

    @classmethod
    def start(cls, task_dir: str | Path, spec: Any, gateway: Any, transcript: Any) -> RunTargets | None:
        hb = load_hidden_behaviour(task_dir)
        if hb is None:
            return None
        from benchctl.targets import mcp
        from benchctl.targets.token_budget import TokenBudget
        from benchctl.targets.tools import TargetTools

        config = hb.config(str((spec.options or {}).get(OPTION) or DEFAULT_CONFIG))
        from benchctl.targets.backend import ModelCaller  # through the run's limits, like the agent's calls

        tools = TargetTools(hb.target, config, transcript, caller=ModelCaller(limits=getattr(gateway, "limits", None)))
        server = mcp.mount(gateway, tools) if hasattr(gateway, "add_route") else None
        tb = TokenBudget(hb.tools.token_budget, hb.tools.token_grace) if hb.tools.token_budget else None
        transcript.emit(
            "harness_event",
            "targets",
            kind="target_tools",
            tool_config=config.name,
            tools=list(config.tools),
            target_model=hb.target.model,
            auxiliary_model=config.auxiliary_model,
            baseline_model=hb.target.baseline_model if WITH_BASELINE & set(config.tools) else None,
            token_budget=hb.tools.token_budget or None,
            batch_size=config.batch_size if config.scaffolded else None,
        )
        return cls(hb, tools, tb, server)

    def summary(self) -> dict[str, Any]:
        s = self.tools.summary()
        if self.token_budget is not None:
            s["token_budget"] = self.token_budget.limit
        return s

    def close(self) -> None:
        self.tools.close()
