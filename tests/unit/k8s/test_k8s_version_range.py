"""Issue 33 item 3: the versions users run. Every patch of 1.33-1.37 is accepted; the newest patch the Go
module proxy serves per minor is the newest modelled; a newer patch of a supported minor is decided as that
newest one (and says so); 1.38.0-beta.0 is a preview decided only when named; only ASCII digits make a
version."""

from __future__ import annotations

import pytest

from numalign.errors import InvalidInputError
from numalign.k8s.version import DEFAULT, NEWEST_PATCH, PREVIEWS, SUPPORTED, KubeletVersion, resolve

SERVED = {(1, 33): 13, (1, 34): 4, (1, 35): 4, (1, 36): 3, (1, 37): 2}  # `go list -m -versions k8s.io/kubernetes`


def test_the_newest_modelled_patch_is_the_newest_served() -> None:
    assert dict(NEWEST_PATCH) == SERVED
    assert KubeletVersion(1, 37, 2) == DEFAULT and str(DEFAULT) == "1.37.2"
    assert len(SUPPORTED) == sum(n + 1 for n in SERVED.values())


@pytest.mark.parametrize("text", ["1.37.2", "v1.37.2", "v1.37.1", "v1.36.3-gke.1200", "1.33.13", "v1.34.4+k3s1"])
def test_every_released_patch_is_accepted_as_itself(text: str) -> None:
    got = KubeletVersion.parse(text)
    assert got.reported is None and got.newer_patch_note() is None
    assert str(got) == text.lstrip("v").split("-")[0].split("+")[0]


@pytest.mark.parametrize(("text", "decided"), [("1.37.5", "1.37.2"), ("v1.36.6-eks-4f7ae1e", "1.36.3"),
                                               ("v1.34.5", "1.34.4"), ("1.33.99", "1.33.13")])
def test_a_newer_patch_is_decided_as_the_newest_checked_one(text: str, decided: str) -> None:
    got = KubeletVersion.parse(text, "nodes.json: items[0]")
    assert str(got) == decided and got == KubeletVersion.parse(decided)
    note = got.newer_patch_note()
    assert note is not None and "\n" not in note
    assert note.startswith(f"kubelet version {text} is newer than the newest ")
    assert note.endswith(f"decided as {decided}")


@pytest.mark.parametrize("text", ["１.３７.２", "1.３７.2", "v1.37.٢", "1.37.２"])
def test_full_width_and_other_unicode_digits_are_not_a_version(text: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        resolve(text, "--kubelet-version")
    assert "is not a kubelet version" in str(err.value) and "\n" not in str(err.value)


def test_the_138_preview_is_decided_only_when_named() -> None:
    (preview,) = PREVIEWS
    assert KubeletVersion.parse("1.38.0-beta.0") == preview == KubeletVersion.parse("v1.38.0-beta.0+k3s1")
    assert str(preview) == "1.38.0-beta.0" and preview.is_preview
    assert KubeletVersion(1, 37, 2) < KubeletVersion(1, 38, 0, "alpha.1") < preview < KubeletVersion(1, 38, 0)
    assert preview not in SUPPORTED and preview != DEFAULT
    for text in ("1.38", "1.38.0", "v1.38.0-alpha.3", "1.38.0-beta.01", "1.38.1"):
        with pytest.raises(InvalidInputError) as err:
            KubeletVersion.parse(text)
        assert "1.38.0-beta.0" in str(err.value), text  # the refusal names the preview to ask for
