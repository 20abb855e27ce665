"""simulate's rejection messages: one per reason, counted per distinct message, bounded whatever the pods."""

from __future__ import annotations

from numalign.cluster.rejections import MESSAGE_CHARS, MESSAGES_PER_REASON, RejectionExample, RejectionTally


def test_the_most_frequent_message_of_each_reason_with_its_first_node_and_pod() -> None:
    tally = RejectionTally()
    tally.add("UnexpectedAdmissionError", "Allocate failed due to A, which is unexpected", "n-1", "ns/a")
    tally.add("UnexpectedAdmissionError", "Allocate failed due to B, which is unexpected", "n-2", "ns/b")
    tally.add("UnexpectedAdmissionError", "Allocate failed due to B, which is unexpected", "n-3", "ns/c")
    tally.add("OutOfcpu", "Node didn't have enough resource: cpu", "n-4", "ns/d")
    tally.add("OutOfcpu", "Node didn't have enough resource: cpu, again", "n-5", "ns/e")
    assert tally.examples() == {
        # sorted by reason; equal counts: the first message seen
        "OutOfcpu": RejectionExample("Node didn't have enough resource: cpu", "n-4", "ns/d", 1, 1),
        "UnexpectedAdmissionError": RejectionExample("Allocate failed due to B, which is unexpected", "n-2", "ns/b",
                                                     2, 1),
    }


def test_distinct_messages_past_the_cap_are_counted_but_not_kept() -> None:
    # 200,000 rejections with a message per pod keep MESSAGES_PER_REASON messages, not one per pod
    tally = RejectionTally()
    for i in range(200_000):
        tally.add("OutOfcpu", f"Node didn't have enough resource: cpu, requested: {i}", f"n-{i % 10_000}", f"ns/p{i}")
    for _ in range(3):
        tally.add("OutOfcpu", "Node didn't have enough resource: cpu, requested: 7", "n-x", "ns/x")
    assert sum(len(m) for m in tally._kept.values()) == MESSAGES_PER_REASON
    assert tally.examples()["OutOfcpu"] == RejectionExample(
        "Node didn't have enough resource: cpu, requested: 7", "n-7", "ns/p7", 4, 200_003 - 4)


def test_a_long_message_is_kept_cut() -> None:
    tally = RejectionTally()
    tally.add("UnexpectedAdmissionError", "x" * (MESSAGE_CHARS + 5), "n", "ns/p")
    assert tally.examples()["UnexpectedAdmissionError"].message == "x" * MESSAGE_CHARS + "..."
