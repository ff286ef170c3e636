"""Red-team attacks on `--redact`: secret shapes that reach a report or an explained log and were left in
(before the fix each of these kept its secret)."""

from __future__ import annotations

import pytest

from tfgpu.render.report import redactor

pytestmark = pytest.mark.safety

CLEAN = redactor(user="alice", host="gpu-box.corp.example", home="/home/alice")


@pytest.mark.parametrize(("text", "secret"), [
    # a token used as a URL's user name, no password (git clone https://TOKEN@github.com/..., pip indexes)
    ("pip install -i https://tok3nvalue1234567890@pypi.example/simple x", "tok3nvalue1234567890"),
    ("git+https://oauthtok3n9876543210@gitlab.example/grp/repo.git", "oauthtok3n9876543210"),
    # HTTP authorization headers of every scheme, not only Bearer
    ("Authorization: token abcdef1234567890abcd", "abcdef1234567890abcd"),
    ("authorization: Basic dXNlcjpodW50ZXIyaHVudGVyMg==", "dXNlcjpodW50ZXIy"),
    # quoted values with spaces, after KEY= or KEY:
    ('password: "hunter2 with spaces"', "with spaces"),
    ("PASSWORD='correct horse battery'", "horse battery"),
    # JSON inside a log line: the quote sits between the key and the colon
    ('{"password": "hunter2hunter2"}', "hunter2hunter2"),
    ('{"api_key":"k3yvalue42"}', "k3yvalue42"),
    # command-line flags
    ("--password hunter2hunter2", "hunter2hunter2"),
    ("--token=abc123abc123abc", "abc123abc123abc"),
    # a private key pasted into a log
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
     "b3BlbnNzaC1rZXktdjEAAAAA"),
])
def test_attack_secret_shapes_are_redacted(text: str, secret: str) -> None:
    out = CLEAN(text)
    assert secret not in out
    assert "<redacted>" in out


@pytest.mark.parametrize(("text", "kept"), [
    ("/var/home/alice/x", "/var/"),  # the home directory is replaced only where a path starts with it
    ("pip install tensorflow==2.15.0 --password-file ok", "tensorflow==2.15.0"),
    ("https://conda.anaconda.org/conda-forge/linux-64/x.conda", "https://conda.anaconda.org/conda-forge"),
    ("tensorflow @ https://files.pythonhosted.org/x.whl", "https://files.pythonhosted.org/x.whl"),
])
def test_redaction_keeps_what_is_not_private(text: str, kept: str) -> None:
    assert kept in CLEAN(text)


@pytest.mark.parametrize("text", [
    "token" * 100_000,                      # `token\w*` backtracked over the whole run at every start
    "eyJ" * 150_000,                        # a JWT start without its dots, at every position
    "://a:b" * 60_000,                     # URL credentials without an @, scanned to the end each time
    "password" * 50_000 + "=",
    "AKIA" * 250_000,
])
def test_attack_redaction_is_linear_on_hostile_text(text: str) -> None:
    # before: ~0.5 MB of these kept `explain --redact` / `doctor --redact` busy for minutes (quadratic regex)
    import time

    start = time.process_time()  # CPU time: other load on the machine does not count
    CLEAN(text)
    assert time.process_time() - start < 2
