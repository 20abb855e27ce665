"""Carries out the pod book's effects on the Node, the agent's pools and its timers, and feeds each
outcome back to the book as an event.

`dispatch(event)` is called with the agent's lock held. Effects run depth first, in the order the book
returned them, so the Node sees releases and admissions in the order the book decided them, and an
effect's outcome is in the book before the next effect is made. Two kinds of work leave the lock:
- container starts (PreStartContainer may take up to its deadline), on the `numalign-start` threads,
  with one pending back-off timer per pod;
- with parallel_allocate (opt-in), a reservation's Allocate calls, on the `numalign-allocate` threads
  (one per call in flight, up to 8; more wait for a free thread, never for the lock).
Each is bound to the serial of the admission it was made for, so a pod replaced or removed meanwhile is
never started, or admitted, by stale work.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from numalign.agent.core import AgentCore
from numalign.agent.entries import PodStatus
from numalign.agent.events import (
    AdmissionFailed,
    Admit,
    Admitted,
    Allocate,
    AllocateAnswered,
    Complete,
    ContainersStarted,
    Effect,
    Event,
    Fault,
    Release,
    Released,
    ReleaseFailed,
    ReservationLost,
    Reserved,
    Start,
    StartCrashed,
)
from numalign.errors import NumalignError
from numalign.k8s.pod import Container, Pod
from numalign.kubelet.devicemanager.endpoint import Endpoint
from numalign.kubelet.devicemanager.prestart import run_pre_start
from numalign.kubelet.node import Node
from numalign.kubelet.plan import Plan

log = logging.getLogger("numalign.agent")


class Executor:
    def __init__(self, core: AgentCore) -> None:
        self.core = core
        self._starter = ThreadPoolExecutor(max_workers=4, thread_name_prefix="numalign-start")
        self._start_timers: dict[str, threading.Timer] = {}
        self._allocator = ThreadPoolExecutor(max_workers=8, thread_name_prefix="numalign-allocate")
        self._allocating = 0  # reservations whose calls are not settled yet
        self.releases_retried = 0  # removals written on a retry (the tick publishes after one)

    # -- queries ------------------------------------------------------------------------------------

    def allocations_in_flight(self) -> int:
        with self.core.lock:
            return self._allocating

    def scheduled_starts(self) -> int:
        """Pods with a container start waiting for its back-off to pass (at most one timer each)."""
        with self.core.lock:
            return len(self._start_timers)

    # -- the book's effects (lock held) ---------------------------------------------------------------

    def dispatch(self, event: Event) -> None:
        """Hand `event` to the book and carry out what follows from it."""
        self.run(self.core.require_book().handle(event))

    def run(self, effects: list[Effect]) -> None:
        todo = collections.deque(effects)
        book = self.core.require_book()
        while todo:
            outcome = self._make(todo.popleft())
            if outcome is not None:
                todo.extendleft(reversed(book.handle(outcome)))

    def _make(self, effect: Effect) -> Event | None:
        node = self.core.require_node()
        match effect:
            case Fault():
                self.core.fault(effect.kind, effect.message)
            case Admit():
                pod = effect.pod
                try:
                    rec = node.decide(pod) if effect.reserve else node.admit(pod)
                except NumalignError as e:
                    return AdmissionFailed(pod.uid, effect.serial, str(e))
                except Exception as e:  # a plugin or provider bug must not take the agent down
                    log.exception("admitting pod %s failed", pod.key)
                    return AdmissionFailed(pod.uid, effect.serial, str(e))
                if isinstance(rec, Plan):
                    if not rec.settled:  # its Allocate calls are left to make
                        return Reserved(pod.uid, effect.serial, rec)
                    rec = rec.record
                return Admitted(pod.uid, effect.serial, rec)
            case Allocate():
                with contextlib.suppress(RuntimeError):  # the pool is shut down while stopping
                    self._allocator.submit(self._allocate, effect.reservation, effect.serial)
                    self._allocating += 1
            case Complete():
                res = effect.reservation
                done = node.commit(res, effect.responses, effect.error)
                if done is None:  # the state was read again meanwhile and the reservation went with it
                    return ReservationLost(res.pod.uid, effect.serial)
                if isinstance(done, Plan):  # the admission goes on to its next plugin call
                    return Reserved(res.pod.uid, effect.serial, done)
                return Admitted(res.pod.uid, effect.serial, done)
            case Start():
                self._schedule_start(effect.uid, effect.serial, effect.delay)
            case Release():
                return self._release(effect)
        return None

    def _release(self, effect: Release) -> Event:
        node, uid = self.core.require_node(), effect.uid
        if not effect.retry:
            node.cancel(uid)  # an admission in flight: its resources go now, its outcome is ignored
        if uid not in node.pods:
            return Released(uid, removed=False)
        try:
            node.remove(uid)
        except NumalignError as e:
            return ReleaseFailed(uid, str(e), effect.retry)
        if effect.retry:
            self.releases_retried += 1
            log.info("released pod uid %s (its removal is written now)", uid)
        else:
            log.info("released pod %s", effect.key)
        return Released(uid, removed=True)

    # -- Allocate off the lock (parallel_allocate; worker threads) -----------------------------------

    def _allocate(self, res: Plan, serial: int) -> None:
        """Make a reservation's Allocate calls in the kubelet's order, stopping at the first failure,
        then settle the admission under the lock."""
        def unexpected(e: Exception) -> None:  # a bug in a plugin client must not leave the pod admitting
            log.exception("Allocate for pod %s failed", res.pod.key, exc_info=e)

        core = self.core
        responses, error = res.make_calls(core.stopping.is_set, unexpected)
        with core.lock:
            self._allocating -= 1
            if core.stopping.is_set() or core.book is None:
                return
            try:
                self.dispatch(AllocateAnswered(res.pod.uid, serial, res, responses, error))
            except Exception as e:
                log.exception("settling the admission of pod %s failed", res.pod.key)
                core.fault("admission_error", f"pod {res.pod.key}: {e}")
            core.after_change()

    # -- starting containers (worker threads) ---------------------------------------------------------

    def _schedule_start(self, uid: str, serial: int, delay: float) -> None:
        """Start the containers of admission `serial` of pod `uid`, at once or after `delay` seconds."""
        core = self.core
        with core.lock:
            if core.stopping.is_set() or core.book is None or not core.book.is_current(uid, serial):
                return
            old = self._start_timers.pop(uid, None)
            if old is not None:
                old.cancel()  # a fresh admission or a new attempt supersedes a pending retry
            if delay <= 0:
                with contextlib.suppress(RuntimeError):  # the pool is shut down while stopping
                    self._starter.submit(self._start_pod, uid, serial)
                return

            def fire() -> None:
                with core.lock:
                    if self._start_timers.get(uid) is timer:
                        del self._start_timers[uid]
                    if core.stopping.is_set() or core.book is None or not core.book.is_current(uid, serial):
                        return  # stopped, or the pod was removed or replaced meanwhile
                    with contextlib.suppress(RuntimeError):
                        self._starter.submit(self._start_pod, uid, serial)

            timer = threading.Timer(delay, fire)
            timer.daemon = True
            self._start_timers[uid] = timer
            timer.start()

    def _start_pod(self, uid: str, serial: int) -> None:
        """Start an admitted pod's containers as the kubelet's pod worker does: PreStartContainer for
        devices whose plugin requires it (the RPC made without the agent's lock, as upstream makes it
        without the device manager's), then the run options. A failure is recorded per container and
        retried with back-off (the book decides when) while this admission stands."""
        core = self.core
        try:
            with core.lock:
                node, book = core.require_node(), core.require_book()
                pod = node.pods.get(uid)
                if core.stopping.is_set() or pod is None or not book.is_current(uid, serial):
                    return
                if book.pods[uid].status != PodStatus.ADMITTED:
                    return
                errors: dict[str, str] = {}
                calls: dict[str, list[tuple[Endpoint, list[str]]]] = {}
                for c in pod.all_containers():
                    try:
                        calls[c.name] = pre_start_calls(node, pod, c)
                    except NumalignError as e:
                        errors[c.name] = str(e)
            for name, container_calls in calls.items():
                for endpoint, ids in container_calls:
                    if core.stopping.is_set():
                        return
                    try:
                        run_pre_start(endpoint, ids)
                    except NumalignError as e:
                        errors[name] = str(e)
                        break
            with core.lock:
                if core.stopping.is_set() or node.pods.get(uid) is not pod or not book.is_current(uid, serial):
                    return  # stopping, or the pod was removed or replaced meanwhile
                with node.transaction() as tx:  # a container's devices may be allocated again here
                    for c in pod.all_containers():
                        if c.name in errors:
                            continue
                        try:
                            node.devices.get_device_run_container_options(pod, c, pre_start=False)
                        except NumalignError as e:
                            errors[c.name] = str(e)
                core.check(tx, f"starting pod uid {uid}")
                self.dispatch(ContainersStarted(uid, serial, errors))
                core.after_change()
        except Exception as e:  # a bug or a failed save must not leave the pod unstarted for good
            log.exception("starting the containers of pod %s failed", uid)
            with core.lock:
                if core.book is not None:
                    self.dispatch(StartCrashed(uid, serial, str(e)))

    # -- stopping -------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Cancel pending starts and stop both pools without waiting: a start blocked in a plugin's
        PreStartContainer ends at its deadline and then sees the stop flag, and an admission whose
        Allocate is in flight is not recorded (the next start admits its pod afresh)."""
        with self.core.lock:
            timers, self._start_timers = list(self._start_timers.values()), {}
        for t in timers:
            t.cancel()
        self._starter.shutdown(wait=False, cancel_futures=True)
        self._allocator.shutdown(wait=False, cancel_futures=True)


def pre_start_calls(node: Node, pod: Pod, container: Container) -> list[tuple[Endpoint, list[str]]]:
    """The PreStartContainer calls a container's start needs (the device manager's answer). A module
    function the executor calls, so a test can make a start fail unexpectedly here: the device manager
    may be compiled (the compiled core), whose methods cannot be replaced on an instance."""
    return node.devices.pre_start_calls(pod, container)
