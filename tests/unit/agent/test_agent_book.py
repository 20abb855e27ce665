"""The pod book driven event by event, without threads, sockets or files: what it decides (the effects)
and what it records (the entries), against a node view held in memory and against a real Node whose
admissions the test carries out itself."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from support.configs import static_node_yaml

from numalign.agent.book import PodBook
from numalign.agent.entries import ContainersStatus, ManifestStatus, PodStatus
from numalign.agent.events import (
    AdmissionFailed,
    Admit,
    Admitted,
    AllocateAnswered,
    ContainersStarted,
    DevicesReported,
    Effect,
    Event,
    Fault,
    ManifestInvalid,
    ManifestLoaded,
    ManifestRemoved,
    PluginRegistered,
    Release,
    Released,
    ReleaseFailed,
    Resumed,
    Start,
    StartCrashed,
    Tick,
)
from numalign.core.decision import AdmitResult, DecisionRecord
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.k8s.manifest import pods_from_yaml
from numalign.k8s.pod import Pod
from numalign.kubelet.node import Node
from numalign.machine.examples import example

GPU = "example.com/gpu"
E = TypeVar("E", bound=Effect)


def pod(name: str, cpus: int = 1, gpus: int = 0, uid: str | None = None) -> Pod:
    limits = f"cpu: {cpus}, memory: 1Gi" + (f", {GPU}: {gpus}" if gpus else "")
    meta = f"{{name: {name}" + (f", uid: {uid}" if uid else "") + "}"
    (p,) = pods_from_yaml(f"apiVersion: v1\nkind: Pod\nmetadata: {meta}\nspec:\n  containers:\n  - name: main\n"
                          f"    resources: {{limits: {{{limits}}}}}\n")
    return p


class View:
    """A node view held in memory: what holds resources, and which plugins are connected."""

    def __init__(self) -> None:
        self.pods: dict[str, Pod] = {}
        self.connected: set[str] = set()

    def held(self, uid: str) -> Pod | None:
        return self.pods.get(uid)

    def plugin_connected(self, resource: str) -> bool:
        return resource in self.connected


def record(p: Pod, admit: bool = True) -> DecisionRecord:
    result = AdmitResult(True) if admit else AdmitResult(False, "TopologyAffinityError", "no fit")
    return DecisionRecord(p.key, p.uid, "single-numa-node", "container", {}, (), result)


def of(effects: Iterable[Effect], kind: type[E]) -> list[E]:
    return [e for e in effects if isinstance(e, kind)]


def admit_all(book: PodBook, view: View, effects: Sequence[Effect], *, admit: bool = True) -> list[Effect]:
    """Answer every Admit effect as the node would, holding the pod when it is admitted."""
    out: list[Effect] = [e for e in effects if not isinstance(e, Admit)]
    for e in of(effects, Admit):
        if admit:
            view.pods[e.pod.uid] = e.pod
        out += book.handle(Admitted(e.pod.uid, e.serial, record(e.pod, admit)))
    return out


def test_a_new_manifest_admits_its_pods_and_starts_their_containers() -> None:
    view = View()
    book = PodBook(view, node_name="Worker-1")
    effects = book.handle(ManifestLoaded("/m/a.yaml", [pod("a"), pod("b")]))
    admits = of(effects, Admit)
    assert [e.pod.name for e in admits] == ["a-worker-1", "b-worker-1"]
    starts = admit_all(book, view, effects)
    entry = book.pods[pod("a").uid]
    assert entry.status == PodStatus.ADMITTED and entry.containers == ContainersStatus.STARTING
    assert starts == [Start(pod("a").uid, entry.serial), Start(pod("b").uid, book.pods[pod("b").uid].serial)]
    assert book.manifests["/m/a.yaml"].pods == [pod("a").uid, pod("b").uid]


def test_a_rejected_pod_is_inactive_and_not_started() -> None:
    view = View()
    book = PodBook(view, mirror_names=False)
    effects = admit_all(book, view, book.handle(ManifestLoaded("/m/a.yaml", [pod("a")])), admit=False)
    assert effects == []
    entry = book.pods[pod("a").uid]
    assert (entry.status, entry.reason) == (PodStatus.REJECTED, "TopologyAffinityError")
    assert [p.name for p in book.inactive_pods()] == ["a"]


def test_an_admission_that_raises_is_a_rejection_and_a_fault() -> None:
    book = PodBook(View(), mirror_names=False)
    (admit,) = book.handle(ManifestLoaded("/m/a.yaml", [pod("a")]))
    assert isinstance(admit, Admit)
    effects = book.handle(AdmissionFailed(admit.pod.uid, admit.serial, "bad pod"))
    assert effects == [Fault("admission_error", "pod default/a: bad pod")]
    assert book.pods[admit.pod.uid].status == PodStatus.REJECTED
    assert book.pods[admit.pod.uid].message == "bad pod"


def test_an_invalid_manifest_changes_nothing_but_its_error() -> None:
    view = View()
    book = PodBook(view, mirror_names=False)
    admit_all(book, view, book.handle(ManifestLoaded("/m/a.yaml", [pod("a")])))
    effects = book.handle(ManifestInvalid("/m/a.yaml", "/m/a.yaml: line 3: not YAML"))
    assert effects == [Fault("invalid_manifest", "/m/a.yaml: line 3: not YAML")]
    info = book.manifests["/m/a.yaml"]
    assert (info.status, info.error, info.pods) == (ManifestStatus.INVALID, "line 3: not YAML", [pod("a").uid])
    assert book.pods[pod("a").uid].status == PodStatus.ADMITTED


def test_a_uid_held_by_another_file_is_refused_on_the_second() -> None:
    view = View()
    book = PodBook(view, mirror_names=False)
    admit_all(book, view, book.handle(ManifestLoaded("/m/a.yaml", [pod("x", uid="same")])))
    effects = book.handle(ManifestLoaded("/m/b.yaml", [pod("y", uid="same"), pod("z")]))
    assert [e.kind for e in of(effects, Fault)] == ["duplicate_pod"]
    assert [e.pod.name for e in of(effects, Admit)] == ["z"]
    assert book.manifests["/m/b.yaml"].status == ManifestStatus.INVALID
    assert "already defined in /m/a.yaml" in (book.manifests["/m/b.yaml"].error or "")
    assert book.pods["same"].file == "/m/a.yaml"


def test_a_changed_spec_is_released_then_admitted_afresh_and_an_unchanged_one_kept() -> None:
    view = View()
    book = PodBook(view, mirror_names=False)
    admit_all(book, view, book.handle(ManifestLoaded("/m/a.yaml", [pod("a"), pod("b")])))
    effects = book.handle(ManifestLoaded("/m/a.yaml", [pod("a"), pod("b", cpus=2)]))
    assert effects[0] == Release(pod("b").uid, "default/b")
    assert [e.pod.name for e in of(effects, Admit)] == ["b"]
    assert not [e for e in effects if isinstance(e, Release) and e.uid == pod("a").uid]


def test_a_removed_file_releases_its_pods() -> None:
    view = View()
    book = PodBook(view, mirror_names=False)
    admit_all(book, view, book.handle(ManifestLoaded("/m/a.yaml", [pod("a"), pod("b")])))
    effects = book.handle(ManifestRemoved("/m/a.yaml"))
    assert effects == [Release(pod("a").uid, "default/a"), Release(pod("b").uid, "default/b")]
    assert book.pods == {} and book.files() == []
    assert book.handle(ManifestRemoved("/m/a.yaml")) == []


def test_an_outcome_for_a_replaced_admission_is_dropped() -> None:
    view = View()
    book = PodBook(view, mirror_names=False, reserve=True)
    (first,) = book.handle(ManifestLoaded("/m/a.yaml", [pod("a", uid="u")]))
    assert isinstance(first, Admit) and first.reserve
    # The file changes before the first admission's Allocate answers: released, admitted afresh.
    effects = book.handle(ManifestLoaded("/m/a.yaml", [pod("a", cpus=2, uid="u")]))
    (second,) = of(effects, Admit)
    assert isinstance(second, Admit) and second.serial != first.serial
    assert not book.is_current("u", first.serial)
    assert book.handle(Admitted("u", first.serial, record(first.pod))) == []
    assert book.handle(AllocateAnswered("u", first.serial, None, [], None)) == []  # type: ignore[arg-type]
    assert book.handle(ContainersStarted("u", first.serial, {"main": "late"})) == []
    assert book.pods["u"].status == PodStatus.ADMITTING


def test_wait_for_plugins_holds_a_pod_until_its_plugin_is_connected_and_reported() -> None:
    view = View()
    book = PodBook(view, mirror_names=False, wait_for_plugins=True)
    assert book.handle(ManifestLoaded("/m/a.yaml", [pod("g", gpus=1)])) == []
    assert book.pods[pod("g").uid].status == PodStatus.PENDING
    assert [p.name for p in book.inactive_pods()] == ["g"]
    view.connected.add(GPU)
    assert book.handle(PluginRegistered(GPU)) == []  # connected, but its devices are not known yet
    assert book.handle(DevicesReported("other.com/nic")) == []
    (admit,) = book.handle(DevicesReported(GPU))
    assert isinstance(admit, Admit) and admit.pod.name == "g"
    assert book.inactive_pods() == []
    # A new registration of the plugin: its devices are unknown again until it reports them.
    book.handle(PluginRegistered(GPU))
    assert not book.has_reported(GPU)


def test_failed_starts_are_retried_with_the_kubelets_back_off_until_one_succeeds() -> None:
    view = View()
    book = PodBook(view, mirror_names=False, start_backoff=10, start_backoff_max=35)
    (start,) = admit_all(book, view, book.handle(ManifestLoaded("/m/a.yaml", [pod("a")])))
    assert isinstance(start, Start)
    delays = []
    for _ in range(4):
        effects = book.handle(ContainersStarted(start.uid, start.serial, {"main": "device busy"}))
        assert of(effects, Fault) == [Fault("container_start_error", "pod default/a container main: device busy")]
        (retry,) = of(effects, Start)
        assert isinstance(retry, Start) and retry.serial == start.serial
        delays.append(retry.delay)
    assert delays == [10, 20, 35, 35]
    entry = book.pods[start.uid]
    assert entry.containers == ContainersStatus.FAILED and entry.to_dict()["start_attempts"] == 4
    assert book.handle(ContainersStarted(start.uid, start.serial, {})) == []
    assert book.pods[start.uid].containers == ContainersStatus.STARTED
    assert "start_attempts" not in book.pods[start.uid].to_dict()
    crashed = book.handle(StartCrashed(start.uid, start.serial, "boom"))
    assert crashed == [Fault("container_start_error", f"pod uid {start.uid}: boom"), Start(start.uid, start.serial, 10)]


def test_a_removal_that_failed_is_retried_on_every_tick_and_faulted_once() -> None:
    view = View()
    book = PodBook(view, mirror_names=False)
    admit_all(book, view, book.handle(ManifestLoaded("/m/a.yaml", [pod("a")])))
    uid = pod("a").uid
    book.handle(ManifestRemoved("/m/a.yaml"))
    assert book.handle(ReleaseFailed(uid, "disk full", retry=False)) == [
        Fault("release_error", f"pod uid {uid}: disk full")]
    assert book.handle(Tick()) == [Release(uid, retry=True)]
    assert book.handle(ReleaseFailed(uid, "disk full", retry=True)) == []
    assert book.handle(Released(uid, removed=True)) == []
    assert book.handle(Tick()) == []


def test_restored_pods_keep_their_files_and_records_and_unfinished_starts_resume() -> None:
    view = View()
    a, b = pod("a"), pod("b")
    view.pods = {a.uid: a, b.uid: b}
    previous = {"pods": {a.uid: {"file": "/m/a.yaml", "containers": "failed", "record": {"pod": "default/a"},
                                 "container_errors": {"main": "busy"}},
                         b.uid: {"file": "/m/a.yaml", "containers": "started"}}}
    book = PodBook(view, view.pods, previous, mirror_names=False)
    assert book.files() == ["/m/a.yaml"]
    assert book.pods[a.uid].record == {"pod": "default/a"} and book.pods[a.uid].container_errors == {"main": "busy"}
    assert book.handle(Resumed()) == [Start(a.uid, book.pods[a.uid].serial)]
    # The same file again, unchanged: nothing released, nothing admitted.
    assert book.handle(ManifestLoaded("/m/a.yaml", [a, b])) == []


def test_with_a_real_node_released_resources_go_to_the_next_pod() -> None:
    """The effects carried out on a Node, as the agent carries them out: a pod that fills the node is
    released when its file goes, and the pod waiting behind it fits."""
    node = Node(example("dual-socket"), config_from_yaml(static_node_yaml(policy="none")))

    class Reader:
        def held(self, uid: str) -> Pod | None:
            return node.pods.get(uid)

        def plugin_connected(self, resource: str) -> bool:
            return False

    book = PodBook(Reader(), mirror_names=False)

    def run(event: Event) -> None:
        todo = list(book.handle(event))
        while todo:
            effect = todo.pop(0)
            outcome: Event | None = None
            if isinstance(effect, Admit):
                outcome = Admitted(effect.pod.uid, effect.serial, node.admit(effect.pod))
            elif isinstance(effect, Release):
                held = effect.uid in node.pods  # a rejected pod holds nothing
                if held:
                    node.remove(effect.uid)
                outcome = Released(effect.uid, removed=held)
            if outcome is not None:
                todo[:0] = book.handle(outcome)

    run(ManifestLoaded("/m/big.yaml", [pod("big", cpus=len(node.cpu.get_allocatable_cpus()))]))
    run(ManifestLoaded("/m/next.yaml", [pod("next", cpus=4)]))
    assert book.pods[pod("big").uid].status == PodStatus.ADMITTED
    assert book.pods[pod("next").uid].status == PodStatus.REJECTED
    run(ManifestRemoved("/m/big.yaml"))
    run(ManifestLoaded("/m/next.yaml", [pod("next", cpus=4, uid="again")]))
    assert book.pods["again"].status == PodStatus.ADMITTED
    assert sorted(node.pods) == ["again"]
