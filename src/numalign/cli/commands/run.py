"""`numalign run [POD.yaml] [REQUESTS] -- COMMAND [ARGS...]`: decide as the kubelet, then pin a real process.

The container is admitted on this host (or --machine) with the kubelet's managers against a state
directory shared with other runs and with `numalign serve`; COMMAND then runs with its CPU affinity,
memory policy, cgroup limits and device environment set to what was decided, and its allocation is
released when it exits. The exit status is COMMAND's (128 + N when a signal N ended it); when
numalign ran nothing, the project's codes (RUN_EXIT_CODES: 1 rejected, 2 invalid input, 3 failed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.cli.commands.summaries import SUMMARIES

if TYPE_CHECKING:
    from numalign.cli.commands.run_request import RunRequest
    from numalign.core.decision import ContainerAllocation
    from numalign.k8s.pod import Pod
    from numalign.machine.topology import Machine
    from numalign.run.launch import Placement
    from numalign.run.process import ProcessRef
    from numalign.run.session import Admission, RunNode

EXIT_REJECTED = 1  # "the answer is no", as admit --exit-code: the container was not admitted
RUN_EXIT_CODES = """exit status:
  N         COMMAND's own; 128 + N when signal N ended it
  1         the container was rejected (its decision record is on stderr); COMMAND was not run
  2         invalid input: flags, a manifest, machine or state directory that cannot be used;
            one line says which and how to fix it; COMMAND was not run
  3         numalign failed (state files, a placement the kernel refused); COMMAND was not run
  126, 127  COMMAND could not be executed, or was not found"""


class _Formatter(argparse.HelpFormatter):
    """Wrapped help text, the exit-status table kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return text if text is RUN_EXIT_CODES else super()._fill_text(text, width, indent)


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "run",
        help=SUMMARIES["run"],
        description="Admit a container on this host as the kubelet would, then run COMMAND with exactly the "
        "CPUs (sched_setaffinity), NUMA memory (set_mempolicy MPOL_BIND), cgroup v2 limits (cpuset, memory.max, "
        "hugetlb; where this process may create cgroups) and device environment decided, and release them "
        "when it exits. Requests come from flags (requests = limits) or from a Pod manifest. The decision goes "
        "to stderr; COMMAND's exit status is returned (see below). Unlike the "
        "kubelet, a request for an extended resource that no device on this machine provides is refused.",
        epilog=RUN_EXIT_CODES,
        formatter_class=_Formatter,
        usage="numalign run [POD.yaml --container NAME | --cpus N --memory Q ...] [options] -- COMMAND [ARGS...]",
    )
    p.add_argument("pod", nargs="?", metavar="POD.yaml", help="a Pod manifest (one pod) instead of request flags")
    p.add_argument("--container", metavar="NAME", help="with POD.yaml: the container COMMAND runs as "
                   "(default: its only container)")
    req = p.add_argument_group("requests (requests = limits; Guaranteed with integer --cpus and --memory "
                               "gets exclusive CPUs, as on the kubelet)")
    req.add_argument("--cpus", metavar="Q", help="CPU, e.g. 2 or 500m")
    req.add_argument("--memory", metavar="Q", help="memory, e.g. 16Gi")
    req.add_argument("--hugepages-2Mi", dest="hugepages_2Mi", metavar="Q", help="2 MiB huge pages, e.g. 512Mi")
    req.add_argument("--hugepages-1Gi", dest="hugepages_1Gi", metavar="Q", help="1 GiB huge pages, e.g. 2Gi")
    req.add_argument("--device", action="append", default=[], metavar="RESOURCE=N",
                     help="devices of an extended resource, e.g. nvidia.com/gpu=1 (repeatable)")
    req.add_argument("--name", metavar="NAME", help="the pod's name (default: COMMAND's name and numalign's pid)")
    dev = p.add_argument_group("devices")
    dev.add_argument("--devices", action="append", default=[], metavar="RESOURCE=FILE",
                     help="the devices of RESOURCE, listed as for `numalign plugin --devices` (replaces what the "
                     "machine lists for it; repeatable)")
    dev.add_argument("--device-env", action="append", default=[], metavar="RESOURCE=NAME",
                     help="the variable naming RESOURCE's assigned device ids (default NUMALIGN_DEVICES_<RESOURCE>; "
                     "nvidia.com/gpu with PCI ids also gets CUDA_VISIBLE_DEVICES)")
    p.add_argument("--machine", metavar="FILE|NAME", help="decide for this machine instead of this host's /sys "
                   "(for tests; the placement must still fit this host)")
    p.add_argument("--state-dir", metavar="DIR", type=Path,
                   help="state shared with other runs and `numalign serve` (default /var/lib/numalign as root, "
                   "else $XDG_STATE_HOME/numalign)")
    p.add_argument("--cgroup-parent", metavar="DIR", type=Path,
                   help="cgroup v2 directory to create the run's cgroup in (default <cgroup2 mount>/numalign)")
    p.add_argument("--no-cgroup", action="store_true", help="create no cgroup (affinity and memory policy only)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print only the decision line (admitted ..., or rejected ...) on stderr; without it the "
                   "decision line, then the device variables set and what the host did not apply (-v 1 adds the "
                   "cgroup made and numalign's own variables)")
    from numalign.cli.options.kubeletflags import add_kubelet_flags
    from numalign.cli.output import add_output_arg

    add_output_arg(p, help="format of the decision printed on stderr (default text)")
    from numalign.cli.options.runargs import RUN_CONFIG

    add_kubelet_flags(p, "a KubeletConfiguration file and the kubelet's own flags (flags win); without --config "
                      f"the built-in {RUN_CONFIG} is the base: static CPU manager with CPU 0 reserved, Static memory "
                      "manager, single-numa-node")
    from numalign.cli.options.versionargs import add_version_args

    add_version_args(p)


def run(args: argparse.Namespace) -> int:
    from numalign.cli.commands.run_request import RunRequest

    return run_command(RunRequest.from_args(args))


def run_command(request: RunRequest) -> int:
    from numalign.cli.options.runargs import (
        build_pod,
        check_host_fits,
        parse_pairs,
        requested_extended,
        serve_plugins,
        this_host,
    )
    from numalign.run.launch import GatedChild, LaunchError
    from numalign.run.plugins import close_plugins, connect_plugins
    from numalign.run.process import ProcessRef, start_time
    from numalign.run.session import RunNode, admit

    command, state_dir, config = list(request.command), request.state_dir, request.config
    if request.machine:
        from numalign.adapters.sysfs import load_machine

        machine = load_machine(request.machine)
    else:
        machine = this_host()
    devices = dict(parse_pairs(request.devices, "--devices", "RESOURCE=FILE", _load_devices))
    device_env = dict(parse_pairs(request.device_env, "--device-env", "RESOURCE=NAME", str))
    sockets = serve_plugins(state_dir)
    pod, container = build_pod(request.pod, command, machine, {**dict.fromkeys(sockets), **devices})
    check_host_fits(machine, config)
    # Plugins registered with a serve on this directory answer for their resources (not --devices ones).
    sockets = {r: s for r, s in sockets.items() if r in requested_extended(pod) and r not in devices}
    node = RunNode(machine, config, state_dir, devices, device_env, kubelet_version=request.kubelet_version,
                   previews=request.previews)
    child = GatedChild(command)  # forked before any gRPC thread exists
    try:
        node.plugins = connect_plugins(sockets)
        ref = ProcessRef(child.pid, start_time(child.pid) or 0, tuple(command))
        # The command's session (it inherits this process's): what it leaves behind stays in it, which
        # tells its orphans from another session's pinned on the same CPUs (run.leftovers).
        record = {**ref.to_dict(), "pod_uid": pod.uid, "session": os.getsid(0)}
        cgroup_path = _cgroup_path(request, pod.uid)
        if cgroup_path is not None:
            record["cgroup"] = str(cgroup_path)
        adm = admit(node, pod, container, record)
        _record_node(request, machine)
    except BaseException:
        child.abort()
        raise
    finally:
        close_plugins(node.plugins)
        node.plugins = {}
    if not adm.record.result.admit:
        child.abort()
        _shown(lambda: _print_decision(request, adm, None, [], None))
        return EXIT_REJECTED
    # What the run holds, as its pod record will say: how its leftovers are found when COMMAND ends.
    held = {**record, "allocation": adm.allocation.to_dict() if adm.allocation is not None else {}}
    try:
        placement, notes, cgroup_info = _place(request, adm, pod, container, ref)
    except BaseException:
        child.abort()
        _release(node, pod.uid, ref, None, held)
        raise
    if adm.allocation is not None and not adm.allocation.exclusive:
        notes.append(SHARED_POOL_NOTE)
    # The decision line names the kubelet version; how it was chosen is detail (-v 1).
    _shown(lambda: _print_decision(request, adm, placement, [*(DETAIL + n for n in request.version_notes), *notes],
                                   cgroup_info))
    try:
        child.start(placement)
    except LaunchError as e:
        _release(node, pod.uid, ref, placement.cgroup, held)
        _say(f"numalign run: error: {e}")
        return e.exit_code
    code = EXIT_REJECTED
    try:
        code = child.wait()
    finally:
        _release(node, pod.uid, ref, placement.cgroup, held)
    return code


# A note that is numalign's own bookkeeping (the cgroup it made): shown with -v 1 and above only.
DETAIL = "\x00detail:"

SHARED_POOL_NOTE = ("shared pool, not exclusive CPUs: the static CPU manager gives exclusive CPUs only to a "
                    "Guaranteed pod's container asking for whole CPUs; pass --cpus N with --memory SIZE")


def _shown(show: Callable[[], None]) -> None:
    """What run says goes to stderr. When stderr is a pipe whose reader has gone (`... 2>&1 | head -3`),
    the run goes on unheard: COMMAND still runs, its exit status stands and its allocation is released;
    stopping there would leave the pod recorded and COMMAND never run, with exit status 0."""
    try:
        show()
        sys.stderr.flush()
    except BrokenPipeError:
        sys.stderr = Path(os.devnull).open("w", encoding="utf-8")  # noqa: SIM115  # lives as long as the process


def _say(line: str) -> None:
    _shown(lambda: print(line, file=sys.stderr))


def _record_node(request: RunRequest, machine: Machine) -> None:
    """numalign_node.json, as admit writes it: `numalign pods --state-dir` reads the directory on this
    machine and run's configuration once every run has ended (else it would assume admit's defaults)."""
    from numalign.cli.options.noderecord import write_record

    if not request.state_dir.is_dir():
        return  # nothing was written there (a rejection on a new directory)
    write_record(request.state_dir, machine, None, request.config_path, list(request.flags), request.kubelet_version)


def _cgroup_path(request: RunRequest, uid: str) -> Path | None:
    if request.no_cgroup:
        return None
    from numalign.run.cgroup import PARENT_NAME, find_cgroup2_mount

    mount = find_cgroup2_mount()
    if request.cgroup_parent is not None:
        return Path(request.cgroup_parent) / uid
    return None if mount is None else mount / PARENT_NAME / uid


def _place(
    request: RunRequest, adm: Admission, pod: Pod, container: str, ref: ProcessRef
) -> tuple[Placement, list[str], dict[str, Any]]:
    from numalign.cli.options.runargs import container_limits
    from numalign.run.cgroup import CgroupLimits, create
    from numalign.run.launch import Placement
    from numalign.run.leftovers import RUN_ENV, run_marker

    alloc = adm.allocation
    assert alloc is not None, "only an admitted container is placed, and it has its allocation"
    mems = frozenset(n for b in alloc.memory for n in b.numa_nodes) or None
    memory_max, hugetlb = container_limits(pod, container)
    notes: list[str] = []
    cgroup = None
    info: dict[str, Any] = {"path": None, "applied": [], "not_applied": [], "reason": "--no-cgroup"}
    if not request.no_cgroup:
        setup = create(
            CgroupLimits(_usable(alloc), mems, memory_max, hugetlb),
            pod.uid, request.cgroup_parent,
        )
        if setup.note():
            notes.append(str(setup.note()))
        if setup.cgroup is not None:
            cgroup = setup.cgroup.path
            applied = f"applied {', '.join(setup.applied)}" if setup.applied else "no limits"
            notes.append(f"{DETAIL}cgroup {cgroup}: {applied}")
        info = {"path": None if cgroup is None else str(cgroup), "applied": setup.applied,
                "not_applied": setup.not_applied, "reason": setup.reason}
    # The marker the command's descendants inherit, so what it leaves behind is found and ended with it.
    env = {**adm.env, RUN_ENV: run_marker(ref)}
    return Placement(_usable(alloc), mems, env, cgroup), notes, info


def _usable(alloc: ContainerAllocation) -> frozenset[int]:
    """Exclusive CPUs as given (checked usable); the shared pool as far as this process may use it."""
    from numalign.run.affinity import allowed_cpus

    cpus = frozenset(alloc.cpus)
    return cpus if alloc.exclusive else (cpus & allowed_cpus() or cpus)


def _release(node: RunNode, uid: str, process: ProcessRef, cgroup: Path | None, held: dict[str, Any]) -> None:
    """COMMAND has ended: end what it left behind (its cgroup, its descendants), then release its pod. A
    release that cannot happen now is said once, as a warning: COMMAND ran, its exit status stands, and
    the next run or serve on the directory releases the pod, since its command has ended."""
    from numalign.errors import NumalignError
    from numalign.run.cgroup import remove_cgroup
    from numalign.run.leftovers import describe_holders, end, leftovers, wait_ended
    from numalign.run.session import release

    try:
        if cgroup is not None:
            remove_cgroup(cgroup)
        ours, pinned = leftovers(held)
        end(ours)
        remaining = wait_ended(ours) | pinned
        if remaining:
            cpus = held["allocation"].get("cpus")
            _say(f"numalign run: warning: CPUs {cpus} stay held for {describe_holders(remaining)}, which COMMAND "
                 "left running on them; they are released once those end (`numalign pods` shows them)")
            return
        release(node, uid, process)
    except (NumalignError, OSError) as e:
        _say(f"numalign run: warning: the allocation was not released: {e}; the next numalign run or serve on "
             "this state directory releases it, since COMMAND has ended")


def _load_devices(value: str) -> Any:
    from numalign.adapters.textfiles import read_text_file
    from numalign.deviceplugin.inventory import load_yaml_devices

    read_text_file(Path(value), "the device list", "a YAML list of devices like '- {id: gpu0, numa: 0}'")
    return [d.device for d in load_yaml_devices(Path(value))]


def _print_decision(
    request: RunRequest, adm: Admission, placement: Placement | None, notes: list[str],
    cgroup: dict[str, Any] | None,
) -> None:
    from numalign.cli.output import emit

    rec = adm.record
    if request.output != "text":
        from numalign.cli.commands.run_document import RunDocument
        from numalign.cli.options.versionargs import version_fields

        doc = RunDocument(rec.to_dict(), version_fields(request.kubelet_version, request.previews), os.getpid(),
                          [n.removeprefix(DETAIL) for n in notes], adm.reclaimed, adm.unapplied,
                          None if placement is None else json.loads(placement.to_json()), cgroup)
        emit(doc.to_dict(), request.output, stream=sys.stderr)  # stdout is the command's
        return
    for key in adm.reclaimed:
        print(f"numalign run: released {key}: its process had ended without releasing it", file=sys.stderr)
    if not rec.result.admit:
        from numalign.answer.present.admit import record_text

        if not request.quiet:
            print(record_text(rec), file=sys.stderr)
        print(f"numalign run: {rec.pod} rejected ({rec.result.reason}); COMMAND was not run; see what holds this "
              f"node with `numalign pods --state-dir {request.state_dir}`", file=sys.stderr)
        return
    from numalign.machine.render import binary_quantity

    alloc = adm.allocation
    assert alloc is not None and placement is not None, "an admitted container has its allocation and placement"
    parts = [f"cpus {alloc.cpus_text} ({'exclusive' if alloc.exclusive else 'shared pool'})"]
    for b in alloc.memory:
        parts.append(f"{b.type} {binary_quantity(b.size)} on NUMA {','.join(map(str, b.numa_nodes))}")
    for res, devs in alloc.devices.items():
        parts.append(f"{res} {' '.join(devs)}")
    from numalign.cli.options.versionargs import version_text

    print(f"numalign run: {rec.pod} admitted ({version_text(request.kubelet_version, request.previews)}): "
          + "; ".join(parts), file=sys.stderr)
    if request.quiet:
        return
    from numalign.run.leftovers import RUN_ENV

    detail = request.detail
    for k, v in sorted(placement.env.items()):
        if k != RUN_ENV or detail:  # RUN_ENV marks the command's processes for numalign itself
            print(f"numalign run:   env {k}={v}", file=sys.stderr)
    for n in notes:
        if not n.startswith(DETAIL):
            print(f"numalign run:   {n}", file=sys.stderr)
        elif detail:
            print(f"numalign run:   {n.removeprefix(DETAIL)}", file=sys.stderr)
    for n in adm.unapplied:
        print(f"numalign run:   {n}", file=sys.stderr)
