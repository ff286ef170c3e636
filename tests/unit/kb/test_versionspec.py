"""compat.VersionSpec agrees with packaging.specifiers on the full PEP 440 grammar (issue 17, item 8): a range
it accepts means what packaging says for every version, and a range outside its narrower grammar (===, pre-,
post-, dev-releases, local versions, epochs in a range) is refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import InvalidSpecifier as PackagingInvalid
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tfgpu.kb.specifiers import InvalidSpecifier, VersionSpec

_release = st.lists(st.integers(0, 12), min_size=1, max_size=3).map(lambda xs: ".".join(map(str, xs)))
_pre = st.sampled_from(["", "", "", "a1", "b2", "rc0", "rc1"])
_post = st.sampled_from(["", "", "", ".post1", ".post0"])
_dev = st.sampled_from(["", "", "", ".dev0", ".dev3"])
_local = st.sampled_from(["", "", "", "+local", "+cu118.7"])
_epoch = st.sampled_from(["", "", "", "", "1!"])


@st.composite
def versions(draw: st.DrawFn, *, local: bool = True) -> str:
    """A version from the whole PEP 440 grammar: epoch, release, pre-, post-, dev-release, local."""
    text = draw(_epoch) + draw(_release) + draw(_pre) + draw(_post) + draw(_dev)
    return text + (draw(_local) if local else "")


@st.composite
def specifiers(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["==", "!=", ">=", "<=", ">", "<", "~=", "==="]))
        ver = draw(versions(local=op in ("==", "!=", "===")))
        if op in ("==", "!=") and draw(st.booleans()) and "+" not in ver:
            ver = draw(_release) + ".*"
        parts.append(op + ver)
    return ",".join(parts)


def _final_releases_only(spec: str) -> bool:
    import re

    return all(re.fullmatch(r"(~=|==|!=|<=|>=|<|>)[0-9]+(\.[0-9]+)*(\.\*)?", p) for p in spec.split(","))


@settings(max_examples=200, deadline=None)
@given(specifiers(), versions())
def test_version_spec_agrees_with_packaging_on_the_full_grammar(spec: str, candidate: str) -> None:
    try:
        theirs = SpecifierSet(spec)
    except PackagingInvalid:
        theirs = None
    try:
        ours = VersionSpec(spec)
    except InvalidSpecifier:
        # refused: outside the narrow grammar (or outside PEP 440 itself)
        assert theirs is None or not _final_releases_only(spec)
        return
    assert theirs is not None, spec  # never accepts what packaging refuses
    assert _final_releases_only(spec)
    assert (Version(candidate) in ours) == theirs.contains(Version(candidate)), (spec, candidate)


@pytest.mark.parametrize("spec", ["===2.1", ">=2.1rc1", "<2.1.post1", "==2.1+local", ">=1!2.0", "!=2.1.dev0"])
def test_ranges_outside_the_narrow_grammar_are_refused(spec: str) -> None:
    SpecifierSet(spec)  # valid PEP 440 ...
    with pytest.raises(InvalidSpecifier, match="final releases only"):
        VersionSpec(spec)  # ... but not a range the knowledge base writes


@pytest.mark.parametrize(("spec", "candidate"), [(">=2.15", "2.15.0.post1"), (">2.15.0", "2.15.0.post1"),
                                                  ("<2.16", "2.16.0rc0"), ("==2.1", "2.1+local"),
                                                  (">=2.14", "2.16.0rc0"), ("~=2.15.0", "1!2.15.0")])
def test_unusual_candidates_follow_packaging(spec: str, candidate: str) -> None:
    assert (Version(candidate) in VersionSpec(spec)) == SpecifierSet(spec).contains(Version(candidate))
