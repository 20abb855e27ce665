"""An admission under way or settled: what Node.decide hands back and Node.commit takes.

The one path every admission takes (numalign.kubelet.podadmission): the admission runs as steps between
the device plugins' Allocate calls, each made where the kubelet makes it; a Plan is the admission paused
at one call (made next: in `admit`'s transaction, or with the lock released by the agent and `numalign
run`), and commit hands the answer back, giving the next Plan or the record.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from numalign.core.decision import DecisionRecord
from numalign.errors import PluginError
from numalign.k8s.pod import Pod
from numalign.kubelet.devicemanager.manager import AllocateCall
from numalign.kubelet.topologymanager.provider import CallSteps, PluginCall

_R = TypeVar("_R")


class Run(Generic[_R]):
    """Steps between plugin calls (CallSteps) driven from outside: `start`, then `send` each call's answer
    or `throw` its error; each gives the next call, or None once the steps have ended, their value then
    in `result`.

    The value is not taken from the generator's end: a compiled generator that returns a value ends by
    raising a StopIteration that carries it, and catching that costs some 2-3 us (more than most of an
    admission's merge). Here the steps' value is kept by a wrapper that then waits at one more yield, and
    `next(steps, None)` runs it to its end without raising anything."""

    def __init__(self, steps: CallSteps[_R]) -> None:
        self.result: _R | None = None
        self._steps = self._kept(steps)

    def _kept(self, steps: CallSteps[_R]) -> Generator[PluginCall | None, Any, None]:
        self.result = yield from steps
        yield None  # plugin calls are never None: the driver's sign that the steps ended

    def start(self) -> PluginCall | None:
        return self._next(next(self._steps, None))

    def send(self, answer: Any) -> PluginCall | None:
        return self._next(self._steps.send(answer))

    def throw(self, error: BaseException) -> PluginCall | None:
        return self._next(self._steps.throw(error))

    def _next(self, call: PluginCall | None) -> PluginCall | None:
        if call is None:
            next(self._steps, None)  # past the last yield: the wrapper ends, raising nothing
        return call

    def close(self) -> None:
        self._steps.close()


@dataclass(frozen=True)
class Plan:
    """An admission paused at a device plugin's Allocate call (`calls`, the one to make next; `steps`, the
    admission to resume with its answer through Node.commit), or settled (`record`, no call left).

    Paused, the pod holds what it was given so far (other admissions see it taken) and is not recorded;
    its verdict is not known yet. Settled, an admitted pod is recorded already."""

    pod: Pod
    outcome: DecisionRecord | None  # the record, once settled
    calls: tuple[AllocateCall, ...] = ()
    reloads: int = 0  # the node's reload count at the decision: a reload since drops the plan
    steps: Run[DecisionRecord] | None = None

    def __init__(self, pod: Pod, outcome: DecisionRecord | None, calls: tuple[AllocateCall, ...] = (),
                 reloads: int = 0, steps: Run[DecisionRecord] | None = None) -> None:
        # Written out: the dataclass decorator's __init__ is interpreted even in the compiled core.
        object.__setattr__(self, "pod", pod)
        object.__setattr__(self, "outcome", outcome)
        object.__setattr__(self, "calls", calls)
        object.__setattr__(self, "reloads", reloads)
        object.__setattr__(self, "steps", steps)

    @property
    def settled(self) -> bool:
        return not self.calls

    @property
    def record(self) -> DecisionRecord:
        """A settled plan's record (a paused one has none yet: its verdict depends on the calls left)."""
        if self.outcome is None:
            raise ValueError(f"the admission of pod {self.pod.key} is paused at a device plugin call: no record yet")
        return self.outcome

    def make_calls(
        self,
        stopped: Callable[[], bool] = lambda: False,
        unexpected: Callable[[Exception], None] | None = None,
    ) -> tuple[list[Any], PluginError | None]:
        """The plan's Allocate call: its response, or the plugin's error, for Node.commit. `unexpected`,
        when given, sees any other exception, which then fails the pod as the plugin's error would;
        without it such an exception propagates."""
        responses: list[Any] = []
        for call in self.calls:
            if stopped():
                break
            try:
                responses.append(call.make())
            except PluginError as e:
                return responses, e
            except Exception as e:
                if unexpected is None:
                    raise
                unexpected(e)
                return responses, PluginError(str(e))
        return responses, None
