"""Cases for tests/harnesses/test_harness_protocols.py: the real objects a harness finds in its
HarnessContext, and fakes each wrong in one way.

mypy must accept every line here except those marked `# rejected`, and reject each of those; the
runtime checks of the same test take the same fakes. This file is ill-typed on purpose.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchctl.gateway.server import Gateway
from benchctl.harness import CostStop, HarnessContext, HarnessGateway, HostTools
from benchctl.limits.run import RunStop
from benchctl.targets.token_budget import TokenBudget
from benchctl.targets.tools import TargetTools, ToolOutput
from benchctl.task_import.open_book import TaskTestsTool

# ---- the real implementations: accepted -------------------------------------------------------


def real_gateway(gateway: Gateway) -> HarnessGateway:
    return gateway


def real_target_tools(tools: TargetTools) -> HostTools:
    return tools


def real_task_tests(tool: TaskTestsTool) -> HostTools:
    return tool


def real_stop(stop: RunStop) -> CostStop:
    return stop


def real_context(
    ctx: HarnessContext, gateway: Gateway, tools: TaskTestsTool, budget: TokenBudget, stop: RunStop
) -> None:
    ctx.gateway, ctx.target_tools, ctx.token_budget, ctx.stop = gateway, tools, budget, stop


def real_classes_are_known_to_mypy(gateway: Gateway, tools: TargetTools, tool: TaskTestsTool, stop: RunStop) -> None:
    # a class mypy could not find would be Any and pass every check above unseen: each is refused here
    a: HostTools = gateway  # noqa: F841  # rejected
    b: CostStop = tools  # noqa: F841  # rejected
    c: HarnessGateway = tool  # noqa: F841  # rejected
    d: HostTools = stop  # noqa: F841  # rejected


# ---- fakes, each wrong in one way: rejected ----------------------------------------------------


class GatewayWithWrongTypes:
    """Every member is there (isinstance passes), but `summary` answers a list and `set_deadline`
    takes no time."""

    socket_path: Path | None = None
    url: str | None = None

    def summary(self) -> list[str]:
        return []

    def set_deadline(self) -> None:
        pass

    def settle(self, timeout: float) -> bool:
        return True

    def add_route(self, prefix: str, handler: Any) -> None:
        pass

    def add_observer(self, observer: Any) -> None:
        pass

    def refused(self, status: int | str, why: str) -> bool:
        return True


class GatewayWithoutRefused:
    """No `refused`: the hook host could not count a forged hook."""

    socket_path: Path | None = None
    url: str | None = None

    def summary(self) -> dict[str, Any]:
        return {}

    def set_deadline(self, unix_seconds: float | None) -> None:
        pass

    def settle(self, timeout: float) -> bool:
        return True

    def add_route(self, prefix: str, handler: Any) -> None:
        pass

    def add_observer(self, observer: Any) -> None:
        pass


class GatewayThatCannotSettle:
    """`settle` takes no timeout: a CLI harness could wait on a stuck call forever."""

    socket_path: Path | None = None
    url: str | None = None

    def summary(self) -> dict[str, Any]:
        return {}

    def set_deadline(self, unix_seconds: float | None) -> None:
        pass

    def settle(self) -> bool:
        return True

    def add_route(self, prefix: str, handler: Any) -> None:
        pass

    def add_observer(self, observer: Any) -> None:
        pass

    def refused(self, status: int | str, why: str) -> bool:
        return True


class ToolsWithoutTimeout:
    """`call` takes no timeout, so ReAct could not bound a tool call by the time left."""

    names = ("probe",)

    def specs(self) -> list[dict[str, Any]]:
        return []

    def call(self, name: str, args: dict[str, Any]) -> ToolOutput:
        return ToolOutput("")


class StopWithFlags:
    """`settled` a flag instead of a method, `reason` a number."""

    reason: int = 0
    info: dict[str, Any] = {}
    settled = False

    def is_set(self) -> bool:
        return False


def wrong_gateway(gateway: GatewayWithWrongTypes) -> HarnessGateway:
    return gateway  # rejected


def gateway_without_refused(gateway: GatewayWithoutRefused) -> HarnessGateway:
    return gateway  # rejected


def gateway_that_cannot_settle(gateway: GatewayThatCannotSettle) -> HarnessGateway:
    return gateway  # rejected


def tools_without_timeout(tools: ToolsWithoutTimeout) -> HostTools:
    return tools  # rejected


def stop_with_flags(stop: StopWithFlags) -> CostStop:
    return stop  # rejected


def harness_uses_what_the_gateway_does_not_offer(ctx: HarnessContext) -> None:
    ctx.gateway.close()  # rejected


def harness_forgets_the_run_may_have_no_stop(ctx: HarnessContext) -> str | None:
    return ctx.stop.reason  # rejected
