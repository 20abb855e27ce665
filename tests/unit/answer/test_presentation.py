"""`numalign admit`'s answer as one document: the text and the JSON/YAML document are rendered from the
same AdmitDocument, so they say the same thing about every pod."""

from __future__ import annotations

from support.configs import static_node_config
from support.machines import gpu_node

from numalign.answer.admit import NodeAnswers, unprovided_extended_resources
from numalign.answer.alignment import PodAlignment
from numalign.answer.present.admit import AdmitDocument, PodAnswer
from numalign.answer.present.text import FULL_RECORDS_UP_TO
from numalign.answer.whatif import Answer
from numalign.k8s.manifest import pod_from_dict
from numalign.k8s.pod import Pod
from numalign.kubelet.node import Node


def _pod(name: str, limits: dict[str, str]) -> Pod:
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": name},
                          "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}, name)


def _document(pods: list[Pod]) -> AdmitDocument:
    node = Node(gpu_node(), static_node_config())
    answers = NodeAnswers(node)
    out = []
    for pod in pods:
        rec = node.admit(pod)
        out.append(PodAnswer(pod, rec, answers.after(pod, rec), unprovided_extended_resources(pod, node)))
    return AdmitDocument("gpu", "gpu; kubelet 1.37.0", node.config, ["a note"], {"kubeletVersion": "1.37.0"},
                         tuple(out))


def test_text_and_json_come_from_the_same_answers() -> None:
    doc = _document([_pod("small", {"cpu": "2", "memory": "1Gi", "example.com/nic": "1"}),
                     _pod("huge", {"cpu": "500", "memory": "1Gi"})])
    as_dict = doc.to_dict()
    assert (as_dict["machine"], as_dict["notes"], as_dict["kubeletVersion"]) == ("gpu", ["a note"], "1.37.0")
    assert as_dict["kubeletConfig"]["cpuManagerPolicy"] == "static"
    small, huge = as_dict["pods"]
    assert small["result"]["admit"] and "alignment" in small and "answer" not in small
    assert not huge["result"]["admit"] and "answer" in huge and "alignment" not in huge
    assert isinstance(doc.pods[0].extra, PodAlignment) and isinstance(doc.pods[1].extra, Answer)
    text = doc.text_lines(details=False)
    assert text[0].startswith("machine gpu; kubelet 1.37.0; topologyManagerPolicy ") and text[1] == "# a note"
    assert "pod default/small: admitted" in "\n".join(text)
    assert any(line.startswith("pod default/huge: REJECTED: " + huge["result"]["reason"]) for line in text)
    # the extended resource no plugin provides: listed in the document, said in the text
    assert doc.pods[0].unprovided == ("example.com/nic",)
    assert any("no device plugin provides example.com/nic" in line for line in text)
    # the allocation line reads the same typed allocation the JSON carries
    cpus = small["allocations"]["c"]["cpus"]
    assert any(line.startswith(f"    c: cpus {cpus} (exclusive") for line in text)
    # the summary first, right under the header and the notes
    at = text.index("1/2 pods admitted")
    assert text[at + 1] == f"  {huge['result']['reason']}: 1 pod (default/huge)"
    assert at < min(i for i, line in enumerate(text) if line.startswith("pod "))


def test_past_the_full_record_count_each_pod_gets_a_few_lines_and_one_shape_one_line() -> None:
    pods = [_pod(f"p{i}", {"cpu": "500", "memory": "1Gi"}) for i in range(FULL_RECORDS_UP_TO + 1)]
    doc = _document(pods)
    text = doc.text_lines(details=False)
    same = [line for line in text if line.endswith("(as default/p0, the same pod shape)")]
    # the repeats in a row share one line naming the first and the last
    assert same == [f"pods default/p1 to default/p{FULL_RECORDS_UP_TO} ({FULL_RECORDS_UP_TO} in a row): REJECTED: "
                    f"{doc.pods[0].record.result.reason} (as default/p0, the same pod shape)"]
    assert len(doc.to_dict()["pods"]) == FULL_RECORDS_UP_TO + 1
    # --details: every record whole, and the document unchanged
    detailed = doc.text_lines(details=True)
    assert sum(1 for line in detailed if line.startswith("pod default/p")) == FULL_RECORDS_UP_TO + 1
    assert len(detailed) > len(text)
