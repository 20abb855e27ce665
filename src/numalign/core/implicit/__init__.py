"""Implicit hint lists: a provider's hints described rather than listed, and the exact merge over them.

Upstream providers list every NUMA mask that can hold a request (2^N - 1 of them); on machines with
many NUMA nodes numalign's providers may answer with an `ImplicitHints` instead, and Policy.merge
decides exactly as it would over the listed masks.

- hints.py: ImplicitHints (the description), HintList/ProviderAnswer (what Policy.merge accepts),
  search_masks and NodeSums (the searches providers and the merge share);
- closest.py: the fittest mask of a size under prefer-closest-numa-nodes;
- merge.py: ImplicitMerger, upstream's HintMerger over explicit and implicit lists.

The provider side (which provider describes what, and from how many NUMA nodes) is
numalign.kubelet.topologymanager.provider and each manager's implicit_hints.py.
"""

from numalign.core.implicit.hints import ExplicitHints, HintList, ImplicitHints, ProviderAnswer

__all__ = ["ExplicitHints", "HintList", "ImplicitHints", "ProviderAnswer"]
