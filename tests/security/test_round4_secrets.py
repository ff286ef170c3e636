"""Issue 28 (safety, round four): one secrets mask. A password or token tfgpu is given (an index URL, a
channel) or reads (a facts file, a report, a log, an installer's output) must not reach the terminal, a log
file, a lockfile or a `--redact`ed report. Every attack runs through the command line."""

from __future__ import annotations

import functools
import http.server
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LOCK_FACTS, needs_engine
from tests.security.helpers import M60, create_argv, env_with_fake_uv, m60_facts, tfgpu, write_facts

pytestmark = [pytest.mark.safety]

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFGPU_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TFGPU_CONFIG", str(tmp_path / "config.toml"))
    (tmp_path / "config.toml").write_text("")


def _redacted(cli: Cli, tmp_path: Path, notes: list[str], secrets: list[str], **facts_over: Any) -> str:
    """`doctor --facts F --json --redact` of the Tesla M60 facts carrying ``notes`` (free text a probe or a
    user put in a facts file): the report someone attaches to an issue. Each of ``secrets`` is checked to be
    in the report without --redact first (the test has teeth)."""
    facts = m60_facts()
    facts["notes"] = notes
    for key, value in facts_over.items():
        facts[key] = value
    path = write_facts(tmp_path, facts)
    rc, plain, err = cli("doctor", "--facts", str(path), "--json")
    assert rc in (0, 1), err
    assert [x for x in secrets if x not in plain] == []
    rc, out, err = cli("doctor", "--facts", str(path), "--json", "--redact")
    assert rc in (0, 1), err
    return out


# --------------------------------------------------------------------------- Medium: index URL passwords


@pytest.mark.parametrize("char", ["'", '"', "@"], ids=["quote", "double-quote", "at"])
def test_medium_index_url_password_with_quotes_or_at_is_masked(cli: Cli, char: str) -> None:
    """Medium. The user's own secret: `--index-url https://alice:PASSWORD@host/simple` where the password holds
    a quote or an `@` (both legal, percent-encoding is optional in practice). Today the mask runs on the
    shell-quoted step text, whose quoting splits the password ('"'"'), or stops at the first `@`: the
    password, or its tail after the `@`, is printed. Instead one mask runs on the value before any quoting:
    `alice:****@pypi.corp.example` and nothing of the password."""
    url = f"https://alice:PWHEAD{char}PWTAIL@pypi.corp.example/simple"
    rc, out, err = cli("plan", "--tf", "2.4.1", "--backend", "pip", "--force", "--index-url", url,
                       "--facts", str(M60))
    assert rc in (0, 1), err
    assert "PWHEAD" not in out + err
    assert "PWTAIL" not in out + err
    assert "alice:****@pypi.corp.example" in out


def test_medium_channel_credentials_are_masked_in_the_step_text_and_notes(cli: Cli) -> None:
    """Medium. `--channel https://u:PW@conda.corp.example/forge` (a private conda channel). Today the password
    is masked in the command line `plan` shows but printed in the step's description ("from https://u:PW@...
    only") and in the note "channels from --channel: ...". Instead every place shows `u:****@`."""
    rc, out, err = cli("plan", "--tf", "2.12.0", "--backend", "conda", "--channel",
                       "https://u:CHANPW9x7@conda.corp.example/forge", "--facts", str(M60))
    assert rc in (0, 1), err
    assert "CHANPW9x7" not in out + err
    assert "u:****@conda.corp.example" in out


# --------------------------------------------------------------------------- Medium: lockfiles carry no credentials


@pytest.fixture(scope="module")
def locked_with_a_password(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`tfgpu lock` against a channel served over HTTP (127.0.0.1) whose URL carries a user and password, as a
    private channel does: the lock's exit code, output and lockfile."""
    from tests.channel_builder import tf_channel
    from tfgpu.cli.app import main

    tmp = tmp_path_factory.mktemp("cred-lock")
    channel = tf_channel(tmp / "channel")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(channel)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in ("TFGPU_HOME", "RATTLER_CACHE_DIR", "TFGPU_CONFIG")}
    os.environ.update(TFGPU_HOME=str(tmp / "home"), RATTLER_CACHE_DIR=str(tmp / "rattler"),
                      TFGPU_CONFIG=str(tmp / "config.toml"))
    (tmp / "config.toml").write_text("")
    try:
        url = f"http://bob:CHANPW5ecret@127.0.0.1:{server.server_address[1]}"
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["lock", "--facts", LOCK_FACTS, "--tf", "2.2.0", "--channel", url, "-o", str(tmp / "conda-lock.yml")])
        lock = tmp / "conda-lock.yml"
        yield {"rc": rc, "out": out.getvalue(), "err": err.getvalue(), "lock": lock.read_text() if lock.exists() else ""}
    finally:
        server.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@needs_engine
@pytest.mark.faults
def test_medium_a_lockfile_never_carries_channel_credentials(locked_with_a_password: dict[str, Any]) -> None:
    """Medium. `tfgpu lock --channel http://bob:PW@host/...` (a private channel). Today the password is written
    into the lockfile seven times: `channels: - url:` and every package's `url:`; a lockfile is made to be
    committed and shared. Instead a lockfile never carries credentials: credential-free URLs (and a note that
    the channel needs authentication)."""
    assert locked_with_a_password["rc"] == 0, locked_with_a_password["err"]
    text = locked_with_a_password["lock"]
    assert "127.0.0.1" in text
    assert "CHANPW5ecret" not in text


@needs_engine
@pytest.mark.faults
def test_new_lock_never_prints_channel_credentials(locked_with_a_password: dict[str, Any]) -> None:
    """New (R4-N11). The same lock: today its progress lines on stderr ("linux-64: recipe ...: python=3.8
    tensorflow-gpu=2.2.0 from http://bob:PW@127.0.0.1:...") print the password into the terminal and the CI
    log. Instead they show `bob:****@`."""
    assert locked_with_a_password["rc"] == 0, locked_with_a_password["err"]
    shown = locked_with_a_password["out"] + locked_with_a_password["err"]
    assert "127.0.0.1" in shown
    assert "CHANPW5ecret" not in shown


# --------------------------------------------------------------------------- Medium: --redact gaps


@pytest.mark.parametrize(("note", "secret"), [
    ("pip index https://alice:Pw1HEAD@Pw1TAIL@pypi.corp.example/simple", "Pw1TAIL"),
    ("docker login -p Dk9SECRETvalue registry.corp.example", "Dk9SECRETvalue"),
    ("machine pypi.corp.example login bob password Nr7SECRETvalue", "Nr7SECRETvalue"),
    ("https://bucket.s3.amazonaws.com/m.h5?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20240101T000000Z"
     "&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe2855dd"
     "c963176630326f1024", "fe5f80f77d5fa3beca038a248ff027d0"),
    ("https://acct.blob.core.windows.net/c/m.h5?sv=2022-11-02&ss=b&srt=o&sp=r&se=2030-01-01T00:00:00Z"
     "&spr=https&sig=Sa5SECRETabcdEFGH%2Bijkl%3D", "Sa5SECRETabcdEFGH"),
], ids=["at-in-url-password", "docker-login-p", "netrc-password", "s3-presigned", "azure-sas"])
def test_medium_redact_removes_these_secret_shapes(cli: Cli, tmp_path: Path, note: str, secret: str) -> None:
    """Medium. A report (`doctor --json --redact`) made to be attached to a public issue; its facts carry free
    text with a secret. Today `--redact` keeps: the part of a URL password after an `@`, `docker login -p
    PASSWORD`, a netrc line's `password X`, the signature of an S3 presigned URL and of an Azure SAS URL
    (anyone holding them can read the object until it expires). Instead each is replaced by <redacted>."""
    out = _redacted(cli, tmp_path, [note], [secret])
    assert secret not in out
    assert "<redacted>" in out


def test_low_redact_of_a_facts_file_removes_that_machines_host_and_user_names(cli: Cli, tmp_path: Path) -> None:
    """Low. `doctor --facts F --redact` (a support engineer redacting a user's report before posting it). Today
    the redactor knows only this machine's user and host names: F's own (its platform.hostname, the user its
    container probe recorded, the names in its paths and notes) are kept. Instead the names the facts file
    itself gives are redacted too."""
    containers = {"runtimes": [], "docker_group": {"user": "bobbyq", "member": False, "root": False}, "toolkit": {}}
    facts = m60_facts()
    out = _redacted(cli, tmp_path, ["probed on gpu-node-xq17 by bobbyq", "job ran as bobbyq on gpu-node-xq17"],
                    ["bobbyq", "gpu-node-xq17"], platform={**facts["platform"], "hostname": "gpu-node-xq17"}, containers=containers,
                    env={"CONDA_PREFIX": "/scratch/bobbyq/envs/tf"})
    assert "bobbyq" not in out
    assert "gpu-node-xq17" not in out


# --------------------------------------------------------------------------- new


def test_new_installer_output_with_credentials_is_masked_in_the_log_and_on_the_terminal(tmp_path: Path) -> None:
    """New (R4-N12). tfgpu masks the passwords in the commands it echoes, but not in what the installer prints:
    an installer (or a private index's error page) that prints `https://alice:TOKEN@host/...` or an
    `Authorization: Bearer ...` header has the line written verbatim into $TFGPU_HOME/logs/create-*.log and
    shown under "last lines of the log" on failure. Instead the one secrets mask runs on every logged and
    shown line."""
    home = tmp_path / "home"
    text = ("error: Failed to fetch: https://alice:S3cr3tTok9@pypi.corp.example/simple/tensorflow/ "
            "(Authorization: Bearer abcDEF123456ghiJKL789)")
    res = tfgpu(*create_argv(tmp_path, ["--name", "tf"], "--no-smoke"),
                env=env_with_fake_uv(tmp_path, home, FAKE_UV_INSTALL=f"print:{text}"))
    assert res.returncode == 1, res.stderr
    logs = "".join(p.read_text() for p in (home / "logs").glob("create-*.log"))
    assert "pypi.corp.example" in logs + res.stderr  # the line is there
    for secret in ("S3cr3tTok9", "abcDEF123456ghiJKL789"):
        assert secret not in res.stdout + res.stderr
        assert secret not in logs


ANACONDA_TOKEN = "ab-1234567890abcdef1234567890abcdef"


def test_new_anaconda_token_in_a_channel_path_is_masked_in_plan(cli: Cli) -> None:
    """New (R4-N13). anaconda.org's private channels carry the token in the path:
    `https://conda.anaconda.org/t/TOKEN/ORG` (conda masks it as /t/<TOKEN>/). Today `plan --channel` prints
    it three times (the step, its command, the note). Instead the token is masked wherever the channel is
    shown."""
    rc, out, err = cli("plan", "--tf", "2.12.0", "--backend", "conda", "--channel",
                       f"https://conda.anaconda.org/t/{ANACONDA_TOKEN}/myorg", "--facts", str(M60))
    assert rc in (0, 1), err
    assert "conda.anaconda.org/t/" in out
    assert ANACONDA_TOKEN not in out + err


@pytest.mark.parametrize(("note", "secret"), [
    (f"conda channel https://conda.anaconda.org/t/{ANACONDA_TOKEN}/myorg", ANACONDA_TOKEN),
    ("NGC key 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", "nvapi-Xy7Zq2Wv9Ut4Sr1Qp6"),
    ("https://storage.googleapis.com/b/m.h5?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature="
     "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9", "0a1b2c3d4e5f60718293a4b5"),
    ("https://d111111abcdef8.cloudfront.net/m.h5?Expires=1700000000&Signature=Lx9Yk2Vb7Nm3Qw5Er8Ty1Ui4Op6As0Df"
     "&Key-Pair-Id=K2JCJMDEHXQW5F", "Lx9Yk2Vb7Nm3Qw5Er8Ty1Ui4Op6As0Df"),
], ids=["anaconda-token-path", "ngc-nvapi-key", "gcs-signed-url", "cloudfront-signed-url"])
def test_new_redact_removes_more_secret_shapes(cli: Cli, tmp_path: Path, note: str, secret: str) -> None:
    """New (R4-N13, R4-N14). Secret shapes a GPU user's report carries and `--redact` keeps today: an
    anaconda.org channel token in its path, an NVIDIA NGC API key (`nvapi-...`, the key for nvcr.io, whose
    images tfgpu recommends), and the signatures of Google Cloud Storage and CloudFront signed URLs (model
    downloads). Instead each is replaced by <redacted>."""
    out = _redacted(cli, tmp_path, [note], [secret])
    assert secret not in out
    assert "<redacted>" in out


def test_new_redact_still_keeps_public_urls_and_versions(cli: Cli, tmp_path: Path) -> None:
    """What the fixes above must keep: a public channel, a wheel URL and versions survive `--redact`."""
    out = _redacted(cli, tmp_path, ["channel https://conda.anaconda.org/conda-forge linux-64",
                                    "wheel https://files.pythonhosted.org/packages/x/tensorflow-2.15.1-cp311.whl"], [])
    assert "https://conda.anaconda.org/conda-forge" in out
    assert "tensorflow-2.15.1-cp311.whl" in out
