"""Answers about one node beyond admit or reject: why a pod was rejected, what is free where and who
holds it, what would make it fit (each change verified by admitting again on a copy of the node), and
how aligned each admitted pod's CPUs, memory and devices are."""
